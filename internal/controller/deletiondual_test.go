package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/fake"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// A deleted Idle set whose backend still accepts a second password its
// status does not account for (its status restored from a backup taken
// before a rotation) is not wound down: it reads Degraded
// (DualPasswordExists, what kubectl rekey recover expects) and names
// recover; recover is then served although the set is deleted, the
// backend is reset to the current secret, and only then does the set go.
func TestDeletionHoldsForUnaccountedSecond(t *testing.T) {
	g := newRig(t, engine.Traits{Overlap: true}, false)
	if err := g.kc.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}); err != nil {
		t.Fatal(err)
	}
	g.settle()
	if err := g.kc.Delete(context.Background(), g.set()); err != nil {
		t.Fatal(err)
	}
	g.store.Allow("secret-restored-away") // the second password the status lost
	dual := &engine.Refusal{Reason: string(reason.DualPasswordExists),
		Message: "app@% on db-0 already has a secondary password, which rekey did not set; the rotation did not start"}
	from := len(g.ev.got)
	for i := 0; i < 2; i++ { // held, and held again
		g.store.FailNext("Precheck", dual)
		if err := g.reconcile(); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
	}
	cs := g.set() // still there: not wound down
	c := meta.FindStatusCondition(cs.Status.Conditions, reason.CondDegraded)
	if c == nil || c.Reason != string(reason.DualPasswordExists) || !strings.Contains(c.Message, "run kubectl rekey recover db") ||
		!strings.Contains(c.Message, "app@% on db-0") || strings.Contains(c.Message, "rotation did not start") {
		t.Fatalf("Degraded condition %+v, want DualPasswordExists naming the user and kubectl rekey recover", c)
	}
	if got := g.events(from); !slices.Contains(got, "Warning DualPasswordExists") {
		t.Errorf("events %v, want a DualPasswordExists Warning", got)
	}
	if g.stored() == "" || !g.store.Accepts("secret-restored-away") {
		t.Fatalf("wound down (source Secret emptied) while both passwords were valid: calls %v", g.store.Calls())
	}

	g.annotate(engine.RecoverAnnotation, "c1")
	g.store.FailNext("Precheck", dual)
	for i := 0; i < 10; i++ {
		if err := g.reconcile(); err != nil {
			t.Fatalf("reconcile after recover: %v", err)
		}
		cs := &v1.CredentialSet{}
		if err := g.kc.Get(context.Background(), g.key, cs); apierrors.IsNotFound(err) {
			if g.store.Accepts("secret-restored-away") || !g.store.Accepts(fake.Secret(1)) || !slices.Contains(g.store.Calls(), "Reset") {
				t.Fatalf("gone, but not reset to the current secret alone first: calls %v", g.store.Calls())
			}
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("the set never went after recover: status %+v, calls %v", g.set().Status, g.store.Calls())
}
