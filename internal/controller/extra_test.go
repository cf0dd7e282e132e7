package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	"rekey.io/rekey/internal/backend/fake"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// extraSecrets stands for the Secrets a backend's system reads (an
// operator's own, outside the distribution): what it holds, and what
// consumers were served at each write to it.
type extraSecrets struct {
	g      *rig
	holds  string
	served []string
}

func (x *extraSecrets) Count() int { return 2 }

func (x *extraSecrets) Stale(_ context.Context, s engine.Secrets) (bool, error) {
	return x.holds != s[fake.Key], nil
}

func (x *extraSecrets) Write(_ context.Context, s engine.Secrets) error {
	x.served = append(x.served, x.g.served())
	x.holds = s[fake.Key]
	return nil
}

// TestExtraSecrets: a backend's extra Secrets get the secrets only once
// the backend accepts them, always before consumers do, are counted in
// the Events, and are not rewritten while they hold them.
func TestExtraSecrets(t *testing.T) {
	g := newRig(t, overlap, false)
	x := &extraSecrets{g: g}
	g.store.SetExtra(x)

	g.store.FailNext("Verify", &engine.Refusal{Reason: string(reason.PendingRejected), Message: "not accepted"})
	_ = g.reconcile()
	if !slices.Contains(g.store.Calls(), "Verify") {
		t.Fatalf("provisioning never verified the secrets: calls %v", g.store.Calls())
	}
	if x.holds != "" || g.served() != "" {
		t.Fatalf("secrets the backend refused were written: extra %q, served %q", x.holds, g.served())
	}

	g.settle()
	if x.holds != g1 || g.served() != g1 {
		t.Fatalf("after provisioning: extra %q, served %q, want %s", x.holds, g.served(), g1)
	}
	g.annotate(engine.RotateAnnotation, "r2")
	g.settle()
	if x.holds != g2 || g.served() != g2 {
		t.Fatalf("after the rotation: extra %q, served %q, want %s", x.holds, g.served(), g2)
	}
	if want := []string{"", g1}; !slices.Equal(x.served, want) {
		t.Errorf("consumers were served %q when the extra Secrets were written, want %q (the system first)", x.served, want)
	}
	for _, why := range []string{"Provisioned", "Distributed"} {
		i := slices.IndexFunc(g.ev.got, func(e string) bool { return strings.HasPrefix(e, "Normal "+why+":") })
		if i < 0 || !strings.Contains(g.ev.got[i], "to 3 Secrets") {
			t.Errorf("no %s Event counting the target and the 2 extra Secrets: %v", why, g.ev.got)
		}
	}
	if err := g.reconcile(); err != nil {
		t.Fatal(err)
	}
	if len(x.served) != 2 {
		t.Errorf("extra Secrets that hold the secrets were written again: %d writes", len(x.served))
	}
}
