package ceph

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rekey.io/rekey/internal/engine"
)

func findingOf(t *testing.T, fs []engine.Finding, check string) engine.Finding {
	t.Helper()
	for _, f := range fs {
		if f.Check == check {
			return f
		}
	}
	t.Fatalf("no %s finding in %+v", check, fs)
	return engine.Finding{}
}

// TestCheckOnRealMon: the checks against a real monitor: all pass for
// client.admin; an admin entity with mon 'allow r' is told the ceph auth
// caps that gives it what rekey's commands need; monitors that do not
// answer are a failure that the health gate, not a refusal, handles.
func TestCheckOnRealMon(t *testing.T) {
	c := sharedCeph(t)
	ctx := context.Background()
	f := newFixture(t, c, inPlaceSpec("client.chk"))
	fs := f.b.Check(ctx, engine.CheckInput{})
	if failed := engine.Failed(fs); len(failed) > 0 {
		t.Fatalf("client.admin fails checks: %+v", failed)
	}
	for _, x := range fs {
		t.Logf("%s %s: %s", x.Target, x.Check, x.Message)
	}

	weak := f.create(t, "client.chk-weak", "mon", "allow r")
	spec := inPlaceSpec("client.chk")
	spec.Admin.Entity = "client.chk-weak"
	w := newFixture(t, c, spec)
	w.store.admin = filepath.Join(t.TempDir(), "weak.keyring")
	if err := os.WriteFile(w.store.admin, []byte(weak.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	w.b.Store = w.store
	caps := findingOf(t, w.b.Check(ctx, engine.CheckInput{}), "caps")
	if caps.OK || !strings.HasPrefix(caps.Fix, "ceph auth caps client.chk-weak mon 'allow *'") {
		t.Fatalf("caps finding %+v", caps)
	}

	spec = inPlaceSpec("client.chk")
	spec.Monitors = []string{"127.0.0.1:1"}
	down := newFixture(t, c, spec)
	down.b.ConnectTimeout = 2 * time.Second
	fs = down.b.Check(ctx, engine.CheckInput{})
	if len(fs) != 1 || fs[0].OK || !fs[0].Deferred || fs[0].Check != "reachable" {
		t.Fatalf("monitors down: %+v", fs)
	}
	f.noKeys(t, "the findings", engine.Short(caps)+engine.Short(fs[0]))
}
