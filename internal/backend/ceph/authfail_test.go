package ceph

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestInvalidatedAdminKeyOnTheRealMon: an admin keyring whose key was
// rotated in the cluster (as another set rotating the same admin does) is
// an AuthenticationFailed refusal naming the entity and the keyring
// Secret — never an unreachable monitor that "resumes by itself" — both
// when the monitor's refusal ends the CLI at once and when the CLI keeps
// hunting (a second, silent monitor in the list) until its timeout.
func TestInvalidatedAdminKeyOnTheRealMon(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	ctx := ctxFor(t)
	const admin = "client.authfail-admin"
	base := newFixture(t, c, inPlaceSpec("client.authfail"))
	old := base.create(t, admin, "mon", "allow *")
	keyring := filepath.Join(filepath.Dir(base.store.rotator), "authfail-admin.keyring")
	if err := os.WriteFile(keyring, []byte(old.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.CLI(ctxFor(t), "auth", "rm", admin) })

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() { // accepts, never answers: a monitor that hangs
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, conn)
		}
	}()

	backend := func(t *testing.T, monitors ...string) *fixture {
		spec := inPlaceSpec("client.authfail")
		spec.Monitors = monitors
		spec.Admin = v1.CephAdmin{Entity: admin, KeyringSecretRef: v1.SecretKeyRef{Name: "ceph-admin", Key: "keyring"}}
		f := newFixture(t, c, spec)
		f.store.admin = keyring
		f.b.Store = f.store
		f.b.ConnectTimeout = 3 * time.Second
		return f
	}
	if _, err := backend(t, c.MonAddr).b.Version(ctx, nil); err != nil {
		t.Fatalf("the admin keyring does not work before its key is rotated: %v", err)
	}
	if _, err := c.CLI(ctx, "auth", "rotate", admin); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		monitors []string
	}{
		{"one monitor", []string{c.MonAddr}},
		{"the monitor and a silent one", []string{c.MonAddr, "v2:" + silent.Addr().String()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := backend(t, tc.monitors...)
			_, err := f.b.Version(ctx, nil)
			t.Logf("error: %v", err)
			var ce *CommandError
			if errors.As(err, &ce) {
				// -1: killed at rekey's own deadline; else the CLI's exit.
				t.Logf("the CLI ended with code %d", ce.Code)
			}
			msg := f.wantRefusal(t, err, reason.AuthenticationFailed, admin)
			if _, ok := engine.AsUnreachable(err); ok {
				t.Fatal("a refused admin key is reported as an unreachable monitor")
			}
			if !errors.Is(err, ErrAuthFailed) {
				t.Fatal("the refusal does not tell ErrAuthFailed")
			}
			for _, w := range []string{"Secret ceph-admin key keyring", "ceph auth get " + admin} {
				if !strings.Contains(msg, w) {
					t.Errorf("the refusal does not say %q: %s", w, msg)
				}
			}
			if strings.Contains(msg, "resumes by itself") {
				t.Errorf("the refusal says it resumes by itself: %s", msg)
			}
		})
	}
}
