package rabbitmq

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestOwnershipOnRealBroker: rekey changes and deletes only users it made
// for this very set, on a real rabbitmq-server; a user of another tenant
// or another set that bears a generation's name is refused with NotOwned
// and left exactly as it was, and an orphan sweep passes it by.
func TestOwnershipOnRealBroker(t *testing.T) {
	br := startBroker(t)
	t.Run("another tenant's user", func(t *testing.T) { t.Parallel(); testForeignUser(t, br) })
	t.Run("another set's generations", func(t *testing.T) { t.Parallel(); testOtherSet(t, br) })
	t.Run("a user of an earlier release is handed over, not adopted", func(t *testing.T) { t.Parallel(); testHandover(t, br) })
	t.Run("marked users work", func(t *testing.T) { t.Parallel(); testMarkedUsersWork(t, br) })
	t.Run("an adopted user is generation 1 and retired after the first rotation", func(t *testing.T) { t.Parallel(); testAdoptLifecycle(t, br) })
	t.Run("a user several sets adopted is deleted by the last", func(t *testing.T) { t.Parallel(); testAdoptShared(t, br) })
}

// unchanged asserts a user still exists with the tags and grants it had
// before, and still logs in with its password.
func (br *broker) unchanged(t *testing.T, b *Backend, name, password string, before state) {
	t.Helper()
	if !br.exists(t, name) {
		t.Fatalf("%s was deleted", name)
	}
	after := br.state(t, name)
	if !slices.Equal(after.tags, before.tags) || !slices.Equal(after.perms, before.perms) || !slices.Equal(after.topics, before.topics) {
		t.Errorf("%s changed:\n  before %+v\n  after  %+v", name, before, after)
	}
	br.login(t, b, name, password, true)
}

// A user another tenant made through the management API under the name of
// this set's first generation: every operation that would change or
// delete it is refused, naming it and the way out; nothing changes.
func testForeignUser(t *testing.T, br *broker) {
	ctx := context.Background()
	spec := br.spec("tenant")
	b := br.backend(t, spec)
	const theirs = "their-password-0123"
	br.putUser(t, "tenant-g1", theirs, "monitoring")
	br.do(t, "their grant", drain(br.admin.UpdatePermissionsIn("prod", "tenant-g1", permissions("^theirs\\."))))
	before := br.state(t, "tenant-g1")
	cur := gen(t, b, 1)
	mark := OwnerTag(testOwner)
	admin := br.m.AdminPassword

	_, err := b.Provision(ctx, cur)
	refused(t, err, string(reason.NotOwned), "user tenant-g1", cur[KeyPassword], theirs, admin)
	refused(t, err, string(reason.NotOwned), "carries no rekey-owner tag")
	refused(t, err, string(reason.NotOwned), "tagging it "+mark)
	refused(t, err, string(reason.NotOwned), "did not change it; nothing was changed")
	br.unchanged(t, b, "tenant-g1", theirs, before)
	br.login(t, b, "tenant-g1", cur[KeyPassword], false)

	refused(t, b.Precheck(ctx, cur), string(reason.NotOwned), "tenant-g1", cur[KeyPassword], admin)
	refused(t, b.Reset(ctx, cur), string(reason.NotOwned), "tenant-g1", cur[KeyPassword], admin)
	br.unchanged(t, b, "tenant-g1", theirs, before)

	// As the pending generation of a rotation from a user rekey made.
	own := engine.Secrets{KeyUsername: "tenant-legacy", KeyPassword: "own-password-0123"}
	if _, err := b.Provision(ctx, own); err != nil {
		t.Fatal(err)
	}
	_, err = b.Apply(ctx, own, cur, 1)
	refused(t, err, string(reason.NotOwned), "tenant-g1", cur[KeyPassword], own[KeyPassword], admin)
	br.unchanged(t, b, "tenant-g1", theirs, before)

	// As the current user a discard would delete.
	pending := gen(t, b, 2)
	if _, err := b.Apply(ctx, engine.Secrets{KeyUsername: "tenant-g1", KeyPassword: theirs}, pending, 2); err != nil {
		t.Fatal(err)
	}
	err = b.Retire(ctx, engine.Secrets{KeyUsername: "tenant-g1", KeyPassword: theirs}, pending)
	refused(t, err, string(reason.NotOwned), "did not delete it", theirs, pending[KeyPassword], admin)
	br.unchanged(t, b, "tenant-g1", theirs, before)

	// Sweeps (Apply's and Reset's orphans, Deprovision) pass it by.
	if err := b.Reset(ctx, pending); err != nil {
		t.Fatal(err)
	}
	if err := b.Deprovision(ctx, pending); err != nil {
		t.Fatal(err)
	}
	br.unchanged(t, b, "tenant-g1", theirs, before)
	if br.exists(t, "tenant-g2") {
		t.Error("Deprovision left tenant-g2, which rekey made")
	}
}

// Two sets with one base on one broker (the controller refuses that when
// it can tell, but not when the endpoint is spelled two ways): neither
// touches the other's users.
func testOtherSet(t *testing.T, br *broker) {
	ctx := context.Background()
	const uidA, uidB = "aaaaaaaa-0000-4000-8000-00000000000a", "bbbbbbbb-0000-4000-8000-00000000000b"
	a, bb := br.backendOf(t, br.spec("shared"), uidA), br.backendOf(t, br.spec("shared"), uidB)
	curA := gen(t, a, 1)
	if _, err := a.Provision(ctx, curA); err != nil {
		t.Fatal(err)
	}
	beforeA := br.state(t, "shared-g1")
	if !slices.Contains(beforeA.tags, OwnerTag(uidA)) {
		t.Fatalf("shared-g1 lacks set A's mark: %v", beforeA.tags)
	}

	// B provisions under A's generation name: refused, naming A.
	curB := gen(t, bb, 1)
	_, err := bb.Provision(ctx, curB)
	refused(t, err, string(reason.NotOwned), "another CredentialSet (UID "+uidA+")", curA[KeyPassword], curB[KeyPassword])

	// B rotates from a generation of its own: its orphan sweep, its Reset
	// and its Deprovision see A's generation and leave it.
	ownB := gen(t, bb, 5)
	if _, err := bb.Provision(ctx, ownB); err != nil {
		t.Fatal(err)
	}
	pendingB := gen(t, bb, 6)
	if _, err := bb.Apply(ctx, ownB, pendingB, 6); err != nil {
		t.Fatal(err)
	}
	if err := bb.Reset(ctx, ownB); err != nil {
		t.Fatal(err)
	}
	if err := bb.Deprovision(ctx, ownB); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"shared-g5", "shared-g6"} {
		if br.exists(t, u) {
			t.Errorf("set B's %s outlived its Deprovision", u)
		}
	}
	br.unchanged(t, a, "shared-g1", curA[KeyPassword], beforeA)
	if err := a.Precheck(ctx, curA); err != nil {
		t.Errorf("set A's next rotation would be refused: %v", err)
	}
}

// A user an earlier rekey made, before users were marked, accepts the
// source Secret's password but carries no mark: it is refused like any
// other (nothing tells it from a user someone else made with a leaked
// password), and the refusal's command hands it over.
func testHandover(t *testing.T, br *broker) {
	ctx := context.Background()
	spec := br.spec("legacy")
	b := br.backend(t, spec)
	cur := gen(t, b, 3)
	br.putUser(t, "legacy-g3", cur[KeyPassword], "policymaker")
	before := br.state(t, "legacy-g3")
	_, err := b.Provision(ctx, cur)
	refused(t, err, string(reason.NotOwned), "legacy-g3", cur[KeyPassword])
	br.unchanged(t, b, "legacy-g3", cur[KeyPassword], before)

	r, _ := engine.AsRefusal(err)
	cmd := regexp.MustCompile(`\(rabbitmqctl (set_user_tags [^)]*)\)`).FindStringSubmatch(r.Message)
	if cmd == nil {
		t.Fatalf("the refusal gives no command: %s", r.Message)
	}
	if want := "set_user_tags legacy-g3 policymaker " + OwnerTag(testOwner); cmd[1] != want {
		t.Errorf("command %q, want %q (its other tags kept)", cmd[1], want)
	}
	if err := br.m.Ctl(strings.Fields(cmd[1])...); err != nil {
		t.Fatal(err)
	}
	p, err := b.Provision(ctx, cur)
	if err != nil || p.Generation != 3 {
		t.Fatalf("Provision after the handover: generation %d, %v", p.Generation, err)
	}
	br.exact(t, "legacy-g3", spec)
	br.login(t, b, "legacy-g3", cur[KeyPassword], true)

	// Tags chosen by someone else are not quoted into a shell command.
	br.putUser(t, "legacy-g4", "x-password", "$(reboot)")
	_, err = b.Provision(ctx, engine.Secrets{KeyUsername: "legacy-g4", KeyPassword: "x-password"})
	refused(t, err, string(reason.NotOwned), "set_user_tags legacy-g4 <its other tags> "+OwnerTag(testOwner))
	if r, _ := engine.AsRefusal(err); strings.Contains(r.Message, "$(reboot)") {
		t.Errorf("the refusal quotes a hostile tag: %s", r.Message)
	}
}

// The mark is harmless: users rekey makes carry it next to the spec's
// tags, log in over AMQP (plain and TLS) and the https management API,
// and hold their grants.
func testMarkedUsersWork(t *testing.T, br *broker) {
	ctx := context.Background()
	spec := br.spec("marked")
	spec.User.Tags = []string{"management"}
	b := br.backend(t, spec)
	cur, pending := gen(t, b, 1), gen(t, b, 2)
	if _, err := b.Provision(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
		t.Fatal(err)
	}
	for _, s := range []engine.Secrets{cur, pending} {
		user, pw := s[KeyUsername], s[KeyPassword]
		br.exact(t, user, spec) // management and rekey-owner-<uid>, nothing else
		u, err := br.admin.GetUser(user)
		br.do(t, "get "+user, err)
		if !slices.Equal(slices.Sorted(slices.Values(u.Tags)), []string{"management", OwnerTag(testOwner)}) {
			t.Errorf("%s carries tags %q", user, u.Tags)
		}
		if err := br.m.CanAuthenticate(user, pw); err != nil {
			t.Errorf("AMQP login as %s: %v", user, err)
		}
		if err := br.m.CanAuthenticateTLS(user, pw); err != nil {
			t.Errorf("AMQPS login as %s: %v", user, err)
		}
		if err := br.m.CanOpenVhost(user, pw, "prod"); err != nil {
			t.Errorf("%s cannot open prod: %v", user, err)
		}
		who, err := br.m.ClientAs(user, pw).Whoami()
		if err != nil {
			t.Fatalf("management API login as %s: %v", user, err)
		}
		if !slices.Contains(who.Tags, "management") || who.Name != user {
			t.Errorf("whoami as %s: %+v", user, who)
		}
		// The management tag grants what it always did: the user's own
		// view of the vhosts it may use, nothing of an administrator's.
		if _, err := br.m.ClientAs(user, pw).ListUsers(); err == nil {
			t.Errorf("%s may list users: the mark must grant nothing", user)
		}
		if _, err := br.m.ClientAs(user, pw).ListVhosts(); err != nil {
			t.Errorf("%s cannot list its vhosts: %v", user, err)
		}
	}
	if err := b.Retire(ctx, cur, pending); err != nil {
		t.Fatal(err)
	}
	if br.exists(t, cur[KeyUsername]) {
		t.Errorf("Retire left %s, which rekey made", cur[KeyUsername])
	}
}
