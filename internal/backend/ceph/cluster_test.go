package ceph

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// Version asks the running mon through the CLI; a wrapper CLI that answers
// for a newer mon (an upgrade) changes what it returns.
func TestVersion(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	f := newFixture(t, c, inPlaceSpec("client.version"))
	ctx := ctxFor(t)
	v, err := f.b.Version(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v != c.Version {
		t.Fatalf("Version = %q, want the mon's %q", v, c.Version)
	}

	upgraded := filepath.Join(c.Dir.Host, "ceph-upgraded")
	script := `#!/bin/sh
for a; do [ "$a" = version ] && { echo '{"version":"ceph version 21.1.0 (0123abcd) umbrella (dev)"}'; exit 0; }; done
exec ` + c.CLIPath + ` "$@"
`
	if err := os.WriteFile(upgraded, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	g := newFixtureCLI(t, c, inPlaceSpec("client.version"), upgraded)
	if v, err := g.b.Version(ctx, nil); err != nil || v != "21.1.0" {
		t.Fatalf("Version through the upgraded CLI = %q, %v; want 21.1.0", v, err)
	}
}

// The mon creates the bootstrap keys; RemoveUnusedKeys deletes the listed
// ones once and nothing else.
func TestRemoveUnusedKeys(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	f := newFixture(t, c, inPlaceSpec("client.unused"))
	ctx := ctxFor(t)
	before := f.entities(t)
	for _, n := range []string{"client.bootstrap-rgw", "client.bootstrap-rbd", "client.bootstrap-osd"} {
		if _, ok := before[n]; !ok {
			t.Fatalf("the mon did not create %s", n)
		}
	}
	want := []string{"client.bootstrap-rgw", "client.bootstrap-rbd"}
	removed, err := f.b.RemoveUnusedKeys(ctx, want)
	if err != nil || !slices.Equal(removed, want) {
		t.Fatalf("RemoveUnusedKeys = %v, %v; want %v", removed, err, want)
	}
	after := f.entities(t)
	for _, n := range want {
		if _, ok := after[n]; ok {
			t.Fatalf("%s still exists", n)
		}
	}
	if _, ok := after["client.bootstrap-osd"]; !ok {
		t.Fatal("client.bootstrap-osd, not listed, was removed")
	}
	if removed, err := f.b.RemoveUnusedKeys(ctx, want); err != nil || len(removed) != 0 {
		t.Fatalf("second RemoveUnusedKeys = %v, %v; want nothing removed", removed, err)
	}
	if _, err := f.b.RemoveUnusedKeys(ctx, []string{"client.bootstrap-osd"}); err == nil {
		t.Fatal("RemoveUnusedKeys deleted a key outside the unused list")
	}
}

// Failures are told apart — an unreachable mon, a refused admin key,
// refused caps — and none of them carries key material, not even the
// malformed key ceph's own keyring parser quotes in its log.
func TestFailuresAreClassifiedWithoutKeys(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	ctx := ctxFor(t)
	dir := filepath.Join(c.Dir.Host, "failures")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	withAdmin := func(t *testing.T, spec v1.CephSpec, admin string, cli ...string) *fixture {
		t.Helper()
		f := newFixtureCLI(t, c, spec, append(cli, c.CLIPath)[0])
		f.store.admin = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".keyring")
		if err := os.WriteFile(f.store.admin, []byte(admin), 0o600); err != nil {
			t.Fatal(err)
		}
		f.b.Store = f.store
		f.b.ConnectTimeout = 2 * time.Second
		return f
	}
	adminKey, err := c.Key(ctx, "client.admin")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("unreachable mon", func(t *testing.T) {
		spec := inPlaceSpec("client.fail")
		spec.Monitors = []string{"v2:127.0.0.1:1", "127.0.0.1:2"}
		f := withAdmin(t, spec, Keyring{Entity: "client.admin", Key: adminKey}.String())
		_, err := f.b.Provision(ctx, nil)
		u, ok := engine.AsUnreachable(err)
		t.Logf("error: %v", err)
		if !ok || u.Instance != "v2:127.0.0.1:1,127.0.0.1:2" {
			t.Fatalf("got %v, want an UnreachableError naming both monitors", err)
		}
		f.noKeys(t, "the error", err.Error())
	})
	t.Run("refused admin key", func(t *testing.T) {
		other := newFixture(t, c, inPlaceSpec("client.fail-other"))
		p, err := other.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		wrong := Keyring{Entity: "client.admin", Key: keyringIn(t, p.Secrets, "client.fail-other").Key}
		f := withAdmin(t, inPlaceSpec("client.fail"), wrong.String())
		_, err = f.b.Provision(ctx, nil)
		if !errors.Is(err, ErrAuthFailed) || errors.Is(err, ErrDenied) {
			t.Fatalf("got %v, want ErrAuthFailed", err)
		}
		f.noKeys(t, "the error", err.Error())
	})
	t.Run("refused caps", func(t *testing.T) {
		weak := newFixture(t, c, inPlaceSpec("client.fail")).create(t, "client.weak-admin", "mon", "allow r")
		spec := inPlaceSpec("client.fail")
		spec.Admin.Entity = "client.weak-admin"
		f := withAdmin(t, spec, weak.String())
		_, err := f.b.Provision(ctx, nil)
		if !errors.Is(err, ErrDenied) || errors.Is(err, ErrAuthFailed) {
			t.Fatalf("got %v, want ErrDenied", err)
		}
		f.noKeys(t, "the error", err.Error())
	})
	t.Run("malformed admin key", func(t *testing.T) {
		// Valid base64, not a valid cephx key: ceph's parser rejects it
		// and logs it in full.
		bad := "[client.admin]\n\tkey = AQBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB==\n"
		f := withAdmin(t, inPlaceSpec("client.fail"), bad)
		_, err := f.b.Provision(ctx, nil)
		if !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("got %v, want ErrAuthFailed", err)
		}
		t.Logf("error: %v", err)
		if strings.Contains(err.Error(), "AQBBBB") {
			t.Fatal("the error quotes the malformed key")
		}
		f.noKeys(t, "the error", err.Error())
	})
	t.Run("missing CLI", func(t *testing.T) {
		f := withAdmin(t, inPlaceSpec("client.fail"), Keyring{Entity: "client.admin", Key: adminKey}.String(), filepath.Join(dir, "no-such-ceph"))
		if _, err := f.b.Provision(ctx, nil); err == nil || !strings.Contains(err.Error(), "no-such-ceph") {
			t.Fatalf("got %v, want an error naming the CLI", err)
		}
	})
}
