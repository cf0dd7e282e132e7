package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
)

// deleteAndDrain deletes the set, as a user does, reconciles until it is
// gone, and returns the Events of the wind-down.
func deleteAndDrain(g *rig) []string {
	g.t.Helper()
	if err := g.kc.Delete(context.Background(), g.set()); err != nil {
		g.t.Fatal(err)
	}
	from := len(g.ev.got)
	for i := 0; i < 10; i++ {
		if err := g.reconcile(); err != nil {
			g.t.Fatalf("reconcile %d: %v", i, err)
		}
		if err := g.kc.Get(context.Background(), g.key, &v1.CredentialSet{}); apierrors.IsNotFound(err) {
			return g.ev.got[from:]
		}
	}
	g.t.Fatalf("the set never went: status %+v", g.set().Status)
	return nil
}

// eventWith is the one Event of events of type and reason typ, failing
// unless there is exactly one.
func eventWith(t *testing.T, events []string, typ string) string {
	t.Helper()
	var found []string
	for _, e := range events {
		if strings.HasPrefix(e, typ+":") {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("events %q, want one %q", events, typ)
	}
	return found[0]
}

// The wind-down says what it did. Its source Secret emptied by hand
// before the set was deleted (a person following a refusal that asks to
// delete a key, then deleting the set before rekey read it back), rekey
// cannot tell what to keep, so it leaves the backend alone: the Event is
// a Warning that says so and that its marks stay, not the Released note that
// everything else and the marks were removed. (Before, it was that
// Normal Released.)
func TestWindDownSourceEmptiedByHand(t *testing.T) {
	g := newRig(t, engine.Traits{Overlap: true}, false)
	g.settle()
	src := g.sourceSecret()
	src.Data = map[string][]byte{}
	if err := g.kc.Update(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	msg := eventWith(t, deleteAndDrain(g), "Warning Released")
	for _, want := range []string{"held none of its current secrets", "left the backend as it was", "with its marks for this set"} {
		if !strings.Contains(msg, want) {
			t.Errorf("event %q does not say %q", msg, want)
		}
	}
}

// A wind-down with the source Secret: the backend step runs, the source
// Secret is emptied and no longer claimed by the gone set's UID, and the
// Event is the Normal Released. A manager that crashed after emptying it
// (the set still there) finds it emptied by rekey, runs nothing again and
// says Released again, not that the secrets were lost.
func TestWindDownEmptiesAndGivesUpTheSource(t *testing.T) {
	g := newRig(t, engine.Traits{Overlap: true}, false)
	g.settle()
	eventWith(t, deleteAndDrain(g), "Normal Released")
	src := g.sourceSecret()
	if len(src.Data) != 0 {
		t.Fatalf("source Secret keeps %d keys after the wind-down", len(src.Data))
	}
	if uid, ok := src.Annotations[naming.CredentialSetUIDAnnot]; ok {
		t.Fatalf("source Secret still claimed by UID %q", uid)
	}

	// The crash after delete/source-emptied: a second set, wound down
	// already but for its finalizer, finds its source Secret so.
	h := newRig(t, engine.Traits{Overlap: true}, false)
	h.settle()
	emptied := h.sourceSecret()
	emptied.Data = map[string][]byte{}
	delete(emptied.Annotations, naming.CredentialSetUIDAnnot)
	if err := h.kc.Update(context.Background(), emptied); err != nil {
		t.Fatal(err)
	}
	eventWith(t, deleteAndDrain(h), "Normal Released")
}

// sourceSecret reads the source Secret of the rig's set, db, which is
// there after the set is gone too.
func (g *rig) sourceSecret() *corev1.Secret {
	g.t.Helper()
	s := &corev1.Secret{}
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"}}
	if err := g.kc.Get(context.Background(), client.ObjectKey{Namespace: fastNamespace, Name: naming.SourceSecretName(cs)}, s); err != nil {
		g.t.Fatal(err)
	}
	return s
}
