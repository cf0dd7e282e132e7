package rabbitmq

import (
	"context"
	"errors"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestOnRealBroker runs every backend operation against a real
// rabbitmq-server; the refusals are in refusals_test.go.
func TestOnRealBroker(t *testing.T) {
	br := startBroker(t)
	t.Run("lifecycle", func(t *testing.T) { t.Parallel(); testLifecycle(t, br) })
	t.Run("provision makes tags and permissions exact", func(t *testing.T) { t.Parallel(); testProvisionExact(t, br) })
	t.Run("reset", func(t *testing.T) { t.Parallel(); testReset(t, br) })
	t.Run("deprovision", func(t *testing.T) { t.Parallel(); testDeprovision(t, br) })
	t.Run("release", func(t *testing.T) { t.Parallel(); testRelease(t, br) })
	t.Run("fenced", func(t *testing.T) { t.Parallel(); testFenced(t, br) })
	t.Run("term", func(t *testing.T) { t.Parallel(); testTermFenced(t, br) })
	t.Run("login check", func(t *testing.T) { t.Parallel(); testLoginCheck(t, br) })
	t.Run("version and cluster", func(t *testing.T) { t.Parallel(); testVersionAndCluster(t, br) })
	t.Run("refusals", func(t *testing.T) { t.Parallel(); testRefusals(t, br) })
}

// One rotation as the engine runs it, with a generation of the set's left
// behind that the status does not account for (a status restored from a
// backup, whose consumers may log in as it): no rotation starts until the
// broker is reset to the current user (recover).
func testLifecycle(t *testing.T, br *broker) {
	ctx := context.Background()
	spec := br.spec("life")
	b := br.backend(t, spec)
	br.putOwned(t, testOwner, "life-g7", "orphan-password") // an interrupted rotation's
	// Not generations of this "life": they must outlive every sweep.
	others := []string{"life-g07", "life-g1x", "life-cell-g2", "lifeg3", "life-g8", "life-g9"}
	for _, other := range others[:5] { // life-g8: made by someone else, never marked
		br.putUser(t, other, "other-password")
	}
	br.putOwned(t, "another-set-uid", "life-g9", "other-password")

	cur := gen(t, b, 1)
	p, err := b.Provision(ctx, cur)
	if err != nil {
		t.Fatal(err)
	}
	if p.Generation != 1 || p.Secrets[KeyUsername] != "life-g1" || p.Secrets[KeyPassword] != cur[KeyPassword] {
		t.Errorf("Provision returned generation %d, user %s", p.Generation, p.Secrets[KeyUsername])
	}
	br.exact(t, "life-g1", spec)
	br.login(t, b, "life-g1", cur[KeyPassword], true)
	if err := br.m.CanOpenVhost("life-g1", cur[KeyPassword], "prod"); err != nil {
		t.Errorf("life-g1 cannot open prod: %v", err)
	}
	err = b.Precheck(ctx, cur)
	refused(t, err, string(reason.DualPasswordExists), "life-g7", "orphan-password", cur[KeyPassword], br.m.AdminPassword)
	refused(t, err, string(reason.DualPasswordExists), "kubectl rekey recover")
	if !br.exists(t, "life-g7") {
		t.Fatal("Precheck removed life-g7")
	}
	if err := b.Reset(ctx, cur); err != nil { // what recover runs
		t.Fatal(err)
	}
	if br.exists(t, "life-g7") {
		t.Error("Reset left the orphan life-g7")
	}
	if err := b.Precheck(ctx, cur); err != nil {
		t.Fatal(err)
	}

	pending := gen(t, b, 2)
	for range 2 { // a crash after Apply makes the engine apply again
		got, err := b.Apply(ctx, cur, pending, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got[KeyUsername] != "life-g2" || got[KeyPassword] != pending[KeyPassword] {
			t.Errorf("Apply returned user %s and another password", got[KeyUsername])
		}
	}
	br.exact(t, "life-g2", spec)
	br.login(t, b, "life-g1", cur[KeyPassword], true) // the overlap
	br.login(t, b, "life-g2", pending[KeyPassword], true)
	if err := br.m.CanOpenVhost("life-g2", pending[KeyPassword], "prod"); err != nil {
		t.Errorf("life-g2 cannot open prod: %v", err)
	}
	if br.exists(t, "life-g7") {
		t.Error("life-g7 is back")
	}
	for _, other := range others {
		if !br.exists(t, other) {
			t.Errorf("Apply deleted %s, which is not a generation of this life", other)
		}
	}

	for range 2 { // Retire is idempotent: the user is gone already
		if err := b.Retire(ctx, cur, pending); err != nil {
			t.Fatal(err)
		}
	}
	br.login(t, b, "life-g1", cur[KeyPassword], false)
	br.login(t, b, "life-g2", pending[KeyPassword], true)
	if br.exists(t, "life-g1") {
		t.Error("Retire left life-g1")
	}
	if err := b.Precheck(ctx, pending); err != nil {
		t.Errorf("the next rotation would be refused: %v", err)
	}
}

// Whatever someone added by hand to the current user, Provision leaves
// exactly the spec's tags, permissions and topic permissions.
func testProvisionExact(t *testing.T, br *broker) {
	ctx := context.Background()
	spec := br.spec("exact")
	spec.User.Tags = []string{"monitoring", "policymaker"}
	b := br.backend(t, spec)
	cur := gen(t, b, 4)
	// rekey's user, to which someone added a tag by hand.
	br.putUser(t, "exact-g4", cur[KeyPassword], "administrator", OwnerTag(testOwner))
	br.do(t, "stray permission", drain(br.admin.UpdatePermissionsIn("prod", "exact-g4", permissions(".*"))))
	br.do(t, "stray topic permission", drain(br.admin.UpdateTopicPermissionsIn("/", "exact-g4", topicPermission("x"))))
	br.do(t, "stray topic permission", drain(br.admin.UpdateTopicPermissionsIn("prod", "exact-g4", topicPermission("amq.topic"))))

	p, err := b.Provision(ctx, cur)
	if err != nil {
		t.Fatal(err)
	}
	if p.Generation != 4 {
		t.Errorf("generation %d, want 4", p.Generation)
	}
	br.exact(t, "exact-g4", spec)
	br.login(t, b, "exact-g4", cur[KeyPassword], true)

	// A user whose name is no generation is adopted as generation 0.
	odd := engine.Secrets{KeyUsername: "exact-legacy", KeyPassword: "legacy-password"}
	if p, err := b.Provision(ctx, odd); err != nil || p.Generation != 0 {
		t.Errorf("Provision(exact-legacy) = generation %d, %v", p.Generation, err)
	}
	br.exact(t, "exact-legacy", spec)
}

// Reset rolls a rotation back: the pending user goes, and the current one
// is repaired even if it was changed meanwhile.
func testReset(t *testing.T, br *broker) {
	ctx := context.Background()
	spec := br.spec("reset")
	b := br.backend(t, spec)
	cur, pending := gen(t, b, 1), gen(t, b, 2)
	if _, err := b.Provision(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
		t.Fatal(err)
	}
	br.putUser(t, "reset-g1", "changed-by-hand", "administrator", OwnerTag(testOwner))
	br.do(t, "clear permissions", drain(br.admin.ClearPermissionsIn("prod", "reset-g1")))
	for range 2 {
		if err := b.Reset(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	br.login(t, b, "reset-g1", cur[KeyPassword], true)
	br.login(t, b, "reset-g1", "changed-by-hand", false)
	br.login(t, b, "reset-g2", pending[KeyPassword], false)
	if br.exists(t, "reset-g2") {
		t.Error("Reset left reset-g2")
	}
	br.exact(t, "reset-g1", spec)
}

func testDeprovision(t *testing.T, br *broker) {
	ctx := context.Background()
	b := br.backend(t, br.spec("depro"))
	cur, pending := gen(t, b, 1), gen(t, b, 2)
	if _, err := b.Provision(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
		t.Fatal(err)
	}
	br.putOwned(t, testOwner, "depro-g5", "orphan-password")
	br.putUser(t, "depro-cell-g1", "other-password")
	br.putUser(t, "depro-g6", "other-password", "management")
	br.putOwned(t, "another-set-uid", "depro-g7", "other-password")
	for range 2 {
		if err := b.Deprovision(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"depro-g1", "depro-g2", "depro-g5"} {
		if br.exists(t, u) {
			t.Errorf("Deprovision left %s", u)
		}
	}
	for u, why := range map[string]string{"depro-cell-g1": "of another base", "depro-g6": "rekey did not make", "depro-g7": "of another set"} {
		if !br.exists(t, u) {
			t.Errorf("Deprovision deleted %s, %s", u, why)
		}
	}
}

// The check reads the management API's reason: a user with no tag is
// refused there even with the right password, and must count as logged
// in; a wrong password or a missing user must not.
func testLoginCheck(t *testing.T, br *broker) {
	b := br.backend(t, br.spec("login"))
	br.putUser(t, "login-untagged", "right-password")
	br.putUser(t, "login-management", "right-password", "management")
	br.putUser(t, "login-custom-tag", "right-password", "nova")
	for _, u := range []string{"login-untagged", "login-management", "login-custom-tag"} {
		br.login(t, b, u, "right-password", true)
		br.login(t, b, u, "wrong-password", false)
		br.login(t, b, u, "", false)
	}
	br.login(t, b, "login-nobody", "right-password", false)
}

func testVersionAndCluster(t *testing.T, br *broker) {
	ctx := context.Background()
	b := br.backend(t, br.spec("info"))
	v, err := b.Version(ctx, nil)
	if err != nil || v == "" || v != br.m.Version {
		t.Errorf("Version = %q, %v; the broker runs %s", v, err, br.m.Version)
	}
	id, err := b.ClusterID(ctx)
	if err != nil || id == "" {
		t.Errorf("ClusterID = %q, %v", id, err)
	}
	cn, err := br.admin.GetClusterName()
	if err == nil && cn.Name != id {
		t.Errorf("ClusterID %q is not the cluster's name %q", id, cn.Name)
	}
	t.Logf("version %s, cluster %s", v, id)
}

// testFenced: a backend whose fence refuses (its manager lost the
// leadership) still reads the broker but changes nothing: a rotation and a
// deletion fail with the fence's refusal, and the users stay as they were.
func testFenced(t *testing.T, br *broker) {
	ctx := context.Background()
	b := br.backend(t, br.spec("fenced"))
	cur := gen(t, b, 1)
	if _, err := b.Provision(ctx, cur); err != nil {
		t.Fatal(err)
	}
	lost := errors.New("not the leader")
	b.Fence = func(context.Context) error { return lost }
	if _, err := b.Apply(ctx, cur, gen(t, b, 2), 2); !errors.Is(err, lost) {
		t.Fatalf("Apply by a fenced manager: %v, want the fence's refusal", err)
	}
	if err := b.Deprovision(ctx, cur); !errors.Is(err, lost) {
		t.Fatalf("Deprovision by a fenced manager: %v, want the fence's refusal", err)
	}
	if br.exists(t, "fenced-g2") || !br.exists(t, "fenced-g1") {
		t.Fatal("a fenced manager changed the broker's users")
	}
	if err := b.Verify(ctx, cur); err != nil {
		t.Fatalf("the current user no longer logs in after a fenced manager's calls: %v", err)
	}
}
