package mysql

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestLockedAdminOnRealMySQL: an admin account locked by
// FAILED_LOGIN_ATTEMPTS (error 3955) is an AuthenticationFailed refusal
// that says the account is locked, names it, the instance and the Secret
// key, and the fix — not an unreachable instance. rekey tries it once per
// call: even with two passwords to try (a rotated admin's current and
// pending), a locked account costs one refused login, not two.
func TestLockedAdminOnRealMySQL(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{NoReplicas: true})
	p := c.Primary
	const right = "locked-admin-right-password-0123456789"
	if err := p.Exec(
		"CREATE USER 'lockadm'@'%' IDENTIFIED BY '"+right+"' FAILED_LOGIN_ATTEMPTS 1 PASSWORD_LOCK_TIME 1",
		"GRANT ALL ON *.* TO 'lockadm'@'%' WITH GRANT OPTION",
	); err != nil {
		t.Fatal(err)
	}
	if err := p.CanLogin("lockadm", "a-wrong-password"); err == nil {
		t.Fatal("a wrong password logged in")
	}
	if err := p.CanLogin("lockadm", right); err == nil || !strings.Contains(err.Error(), "3955") {
		t.Fatalf("after one failed login the account is not locked: %v", err)
	}
	aborted := func() int {
		t.Helper()
		v, err := p.QueryString("SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME='Aborted_connects'")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(v)
		return n
	}
	insts := []Instance{{Name: p.Name, Addr: p.Addr()}}
	ctx := context.Background()
	ref := &v1.SecretKeyRef{Name: "mysql-admin", Key: "password"}

	t.Run("fixed admin password", func(t *testing.T) {
		spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: "lockadm", PasswordSecretRef: ref}, Users: []v1.MySQLUser{{Name: "lockapp"}}}
		b, err := New(spec, insts, right, caPEM(t))
		if err != nil {
			t.Fatal(err)
		}
		cur := engine.Secrets{"LOCKAPP_PASSWORD": "lockapp-password-0123456789abcdef"}
		_, perr := b.Provision(ctx, cur)
		_, verr := b.Version(ctx, cur)
		for name, err := range map[string]error{"Provision": perr, "Version": verr, "Precheck": b.Precheck(ctx, cur)} {
			t.Logf("%s: %v", name, err)
			lockedRefusal(t, name, err, right, p.Name, "Secret mysql-admin key password")
		}
	})

	t.Run("rotated admin: one login, not one per password", func(t *testing.T) {
		spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: "lockadm"}, Users: []v1.MySQLUser{{Name: "lockadm"}}}
		b, err := New(spec, insts, "", caPEM(t))
		if err != nil {
			t.Fatal(err)
		}
		key := b.AdminKey
		cur := engine.Secrets{key: right}
		pending := engine.Secrets{key: "the-pending-password-0123456789abcd"}
		before := aborted()
		err = b.CheckDiscardHealth(ctx, cur, pending) // tries pending, then cur
		lockedRefusal(t, "CheckDiscardHealth", err, right, p.Name, "the password rekey holds")
		// The server counts a refused connection as its thread ends, after
		// the client got the refusal: on a loaded machine the counter moves
		// a little after the call returned.
		n := aborted() - before
		for deadline := time.Now().Add(10 * time.Second); n < 1 && time.Now().Before(deadline); n = aborted() - before {
			time.Sleep(20 * time.Millisecond)
		}
		if n != 1 {
			t.Errorf("%d refused logins for one call, want 1", n)
		}
	})
}

// lockedRefusal checks err is AuthenticationFailed, says the account is
// locked with error 3955, names account, instance and where the password
// is, and holds neither the password nor MySQL's own message.
func lockedRefusal(t *testing.T, call string, err error, password, inst, where string) {
	t.Helper()
	rf, ok := engine.AsRefusal(err)
	if !ok || rf.Reason != string(reason.AuthenticationFailed) {
		t.Fatalf("%s: %v, want an AuthenticationFailed refusal", call, err)
	}
	if _, ok := engine.AsUnreachable(err); ok {
		t.Fatalf("%s: a locked account is reported as an unreachable instance", call)
	}
	for _, w := range []string{"MySQL error 3955", "locked", "lockadm", inst, where, "ACCOUNT UNLOCK"} {
		if !strings.Contains(rf.Message, w) {
			t.Errorf("%s: the refusal does not say %q: %s", call, w, rf.Message)
		}
	}
	for _, bad := range []string{password, "consecutive failed logins", "day(s)"} {
		if strings.Contains(rf.Message, bad) {
			t.Errorf("%s: the refusal repeats %q", call, bad)
		}
	}
}
