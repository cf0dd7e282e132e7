package rabbitmq

import (
	"context"
	"strconv"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// Every refusal names the user and the next step and holds no password:
// neither the rotated ones nor the admin's.
func testRefusals(t *testing.T, br *broker) {
	ctx := context.Background()
	admin := br.m.AdminPassword

	t.Run("provision leaves a user of its own it holds no password for", func(t *testing.T) {
		// rekey's mark alone is no licence to re-password: consumers may
		// hold the password the broker has.
		b := br.backend(t, br.spec("taken"))
		br.putOwned(t, testOwner, "taken-g1", "someone-elses-password")
		cur := gen(t, b, 1)
		_, err := b.Provision(ctx, cur)
		refused(t, err, string(reason.ProvisionFailed), "taken-g1", cur[KeyPassword], "someone-elses-password", admin)
		br.login(t, b, "taken-g1", "someone-elses-password", true)
	})

	t.Run("precheck", func(t *testing.T) {
		b := br.backend(t, br.spec("pre"))
		cur := gen(t, b, 1)
		if _, err := b.Provision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		br.repassword(t, "pre-g1", "changed-by-hand")
		err := b.Precheck(ctx, cur)
		refused(t, err, string(reason.KeyMismatch), "pre-g1", cur[KeyPassword], "changed-by-hand", admin)
		refused(t, err, string(reason.KeyMismatch), "kubectl rekey recover")
		br.do(t, "delete pre-g1", drain(br.admin.DeleteUser("pre-g1")))
		err = b.Precheck(ctx, cur)
		refused(t, err, string(reason.RotateRefused), "pre-g1", cur[KeyPassword], admin)
		refused(t, err, string(reason.RotateRefused), "does not exist")
	})

	t.Run("retire keeps the current user when the pending one does not log in", func(t *testing.T) {
		b := br.backend(t, br.spec("keep"))
		cur, pending := gen(t, b, 1), gen(t, b, 2)
		if _, err := b.Provision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
			t.Fatal(err)
		}
		br.repassword(t, "keep-g2", "changed-by-hand")
		err := b.Retire(ctx, cur, pending)
		refused(t, err, string(reason.PendingRejected), "keep-g2", cur[KeyPassword], pending[KeyPassword], "changed-by-hand", admin)
		// The discard began: the way out is the password set back, never
		// recover, which an engine refuses once a discard began.
		refused(t, err, string(reason.PendingRejected), "back to the source Secret's password_PENDING")
		if strings.Contains(err.Error(), "recover") {
			t.Errorf("Retire's refusal names recover, which a begun discard refuses: %v", err)
		}
		br.login(t, b, "keep-g1", cur[KeyPassword], true)
		br.repassword(t, "keep-g2", pending[KeyPassword]) // as the refusal says
		if err := b.Retire(ctx, cur, pending); err != nil {
			t.Fatalf("Retire once the password was set back: %v", err)
		}
		br.login(t, b, "keep-g1", cur[KeyPassword], false)
	})

	t.Run("pending user equal to the current one", func(t *testing.T) {
		b := br.backend(t, br.spec("same"))
		cur := gen(t, b, 1)
		_, err := b.Apply(ctx, cur, cur, 1)
		refused(t, err, string(reason.RotateRefused), "same-g1", cur[KeyPassword])
		refused(t, b.Retire(ctx, cur, cur), string(reason.DiscardRefused), "same-g1", cur[KeyPassword])
		if br.exists(t, "same-g1") {
			t.Error("a refused Apply created the user")
		}
	})

	t.Run("pattern only PCRE can judge", func(t *testing.T) {
		spec := br.spec("pcre")
		spec.User.Permissions[1].Configure = `(?!a` // RE2 stops at (?!, PCRE finds no closing paren
		b := br.backend(t, spec)
		cur := gen(t, b, 1)
		_, err := b.Provision(ctx, cur)
		refused(t, err, string(reason.InvalidSpec), `user.permissions[vhost "prod"]`, cur[KeyPassword], admin)

		spec = br.spec("pcretopic")
		spec.User.TopicPermissions[0].Read = `(?<=x`
		b = br.backend(t, spec)
		_, err = b.Provision(ctx, cur)
		refused(t, err, string(reason.InvalidSpec), `user.topicPermissions[vhost "/", exchange "amq.topic"]`, cur[KeyPassword], admin)
	})

	t.Run("vhost that does not exist", func(t *testing.T) {
		spec := br.spec("novhost")
		spec.User.Permissions = append(spec.User.Permissions, v1.RabbitMQPermission{Vhost: "nowhere", Read: ".*"})
		b := br.backend(t, spec)
		cur := gen(t, b, 1)
		_, err := b.Provision(ctx, cur)
		refused(t, err, string(reason.BackendError), `vhost "nowhere"`, cur[KeyPassword], admin)
	})

	t.Run("the admin user is never touched", func(t *testing.T) {
		br.putUser(t, "svcadm-g1", "svcadm-admin-password", "administrator")
		b, err := New(br.spec("svcadm"), testOwner, "svcadm-g1", "svcadm-admin-password", br.m.CAPEM)
		if err != nil {
			t.Fatal(err)
		}
		cur := engine.Secrets{KeyUsername: "svcadm-g1", KeyPassword: "another-password"}
		_, err = b.Provision(ctx, cur)
		refused(t, err, string(reason.InvalidSpec), "svcadm-g1", "svcadm-admin-password", "another-password")
		refused(t, b.Reset(ctx, cur), string(reason.InvalidSpec), "svcadm-g1", "svcadm-admin-password", "another-password")
		pending := gen(t, b, 2)
		if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
			t.Fatal(err)
		}
		refused(t, b.Retire(ctx, cur, pending), string(reason.InvalidSpec), "svcadm-g1", "svcadm-admin-password")
		if err := b.Deprovision(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if br.exists(t, "svcadm-g2") || !br.exists(t, "svcadm-g1") {
			t.Error("Deprovision must delete svcadm-g2 and keep the admin svcadm-g1")
		}
		// Even marked as this set's, the admin keeps its tags on Release.
		br.putUser(t, "svcadm-g1", "svcadm-admin-password", "administrator", OwnerTag(testOwner))
		if err := b.Release(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if tags := br.state(t, "svcadm-g1").tags; len(tags) != 2 {
			t.Errorf("Release changed the admin's tags: %v", tags)
		}
		br.login(t, b, "svcadm-g1", "svcadm-admin-password", true)
	})

	t.Run("wrong admin password", func(t *testing.T) {
		b, err := New(br.spec("badadmin"), testOwner, br.m.AdminUser, "not-the-admin-password", br.m.CAPEM)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Version(ctx, nil)
		refused(t, err, string(reason.AuthenticationFailed), "admin Secret", "not-the-admin-password")
		cur := gen(t, b, 1)
		_, err = b.Provision(ctx, cur)
		refused(t, err, string(reason.AuthenticationFailed), br.m.AdminUser, "not-the-admin-password", cur[KeyPassword])
		_, err = b.ClusterID(ctx)
		refused(t, err, string(reason.AuthenticationFailed), "admin Secret", "not-the-admin-password")
	})

	// RabbitMQ locks no user after failed logins; its disabled account is
	// one without tags, which the management API refuses as it refuses a
	// wrong password. The refusal names the fix, and the controller holds
	// the set (AuthenticationFailed) instead of retrying.
	t.Run("admin user without tags", func(t *testing.T) {
		br.putUser(t, "untagged-admin", "untagged-admin-password")
		b, err := New(br.spec("untagged"), testOwner, "untagged-admin", "untagged-admin-password", br.m.CAPEM)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Version(ctx, nil)
		refused(t, err, string(reason.AuthenticationFailed), "rabbitmqctl set_user_tags untagged-admin administrator", "untagged-admin-password")
		cur := gen(t, b, 1)
		_, err = b.Provision(ctx, cur)
		refused(t, err, string(reason.AuthenticationFailed), `"untagged-admin"`, "untagged-admin-password", cur[KeyPassword])
		if br.exists(t, "untagged-g1") {
			t.Error("an admin the management API refused created a user")
		}
	})
}

// No broker on the endpoint: every call says which instance is
// unreachable (the health gate's cue), unless the caller gave up first.
func TestUnreachable(t *testing.T) {
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	spec := validSpec()
	spec.Endpoint = "https://127.0.0.1:" + strconv.Itoa(port)
	b, err := New(spec, testOwner, "admin", testAdminPassword, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cur, pending := gen(t, b, 1), gen(t, b, 2)
	_, verr := b.Version(ctx, nil)
	_, cerr := b.ClusterID(ctx)
	_, perr := b.Provision(ctx, cur)
	_, aerr := b.Apply(ctx, cur, pending, 2)
	for name, err := range map[string]error{
		"Version": verr, "ClusterID": cerr, "Provision": perr, "Precheck": b.Precheck(ctx, cur), "Apply": aerr,
		"Retire": b.Retire(ctx, cur, pending), "Reset": b.Reset(ctx, cur), "Deprovision": b.Deprovision(ctx, cur),
		"Release": b.Release(ctx, cur),
	} {
		u, ok := engine.AsUnreachable(err)
		if !ok || u.Instance != spec.Endpoint {
			t.Errorf("%s: want an UnreachableError for %s, got %v", name, spec.Endpoint, err)
		}
		noSecret(t, err, testAdminPassword, cur[KeyPassword], pending[KeyPassword])
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Precheck(cancelled, cur); err == nil {
		t.Error("Precheck succeeded with a cancelled context")
	} else if _, ok := engine.AsUnreachable(err); ok {
		t.Errorf("a cancelled reconcile is not an unreachable broker: %v", err)
	}
}
