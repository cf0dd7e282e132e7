package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// TestTransitionCarriesCoverage: a status write of a transition carries the
// coverage measured earlier in the same reconcile. Here the acknowledgement
// that lets AfterRollout discard is counted, the reconcile runs step
// Discarding, and its last write (observe's) is lost to a race: the status
// must still say the group moved, rather than what the reconcile before
// had seen, and the rotation completes with it.
func TestTransitionCarriesCoverage(t *testing.T) {
	g := newRig(t, overlap, false)
	cs := g.set()
	cs.Spec.Rotation.DiscardPolicy = v1.DiscardAfterRollout
	cs.Spec.ConsumerGroups = []v1.ConsumerGroup{{Name: "daemons", Members: []string{"node-1"}}}
	if err := g.kc.Update(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	fromDistributed(g)
	if st := g.set().Status; st.Phase != v1.PhaseDistributed || st.ConsumersUpdated != "0/1" {
		t.Fatalf("before the ack: phase %s, consumers %s; want Distributed, 0/1", st.Phase, st.ConsumersUpdated)
	}
	served := &corev1.Secret{}
	if err := g.kc.Get(context.Background(), client.ObjectKey{Namespace: "app", Name: "db-creds"}, served); err != nil {
		t.Fatal(err)
	}
	g.annotate(engine.AckAnnotationPrefix+"daemons", served.Annotations[naming.SecretHashAnnotation]+":node-1")

	// Every status write once the discard is applied is refused as a
	// lost race: the writes of the step go through, observe's not.
	lost := 0
	kc := g.r.Client
	g.r.Client = interceptor.NewClient(g.kc.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			now := &v1.CredentialSet{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), now); err == nil && now.Status.DiscardApplied {
				lost++
				return apierrors.NewConflict(schema.GroupResource{Group: v1.GroupVersion.Group, Resource: "credentialsets"}, obj.GetName(), nil)
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
	if err := g.reconcile(); err != nil {
		t.Fatalf("a lost race is retried quietly: %v", err)
	}
	if lost == 0 {
		t.Fatal("no status write was refused after the discard: the test proves nothing")
	}
	moved := func(st v1.CredentialSetStatus) bool {
		i := slices.IndexFunc(st.Consumers, func(c v1.ConsumerStatus) bool { return c.Name == "daemons" })
		return st.ConsumersUpdated == "1/1" && i >= 0 && st.Consumers[i].RolledOut && slices.Equal(st.Consumers[i].MembersUpdated, []string{"node-1"})
	}
	if st := g.set().Status; !st.DiscardApplied || !moved(st) {
		t.Fatalf("after the discard: discardApplied %v, status.consumers %s %+v; want the discard applied and group daemons moved (node-1)", st.DiscardApplied, st.ConsumersUpdated, st.Consumers)
	}
	g.r.Client = kc
	g.settle()
	if st := g.set().Status; st.Phase != v1.PhaseIdle || st.KeyGeneration != 2 || !moved(st) {
		t.Fatalf("phase %s at key generation %d, consumers %s; want the rotation complete (Idle at 2) and group daemons moved", st.Phase, st.KeyGeneration, st.ConsumersUpdated)
	}
}

// TestNextRotationRecorded: status.nextRotationAt says when the Schedule
// policy rotates next, from the time the current credentials were made.
func TestNextRotationRecorded(t *testing.T) {
	g := newRig(t, overlap, false)
	cs := g.set()
	cs.Spec.Rotation.Policy = v1.PolicySchedule
	cs.Spec.Rotation.Interval = &metav1.Duration{Duration: time.Hour}
	if err := g.kc.Update(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	fromIdle(g)
	st := g.set().Status
	if st.CurrentSince == nil || st.NextRotationAt == nil || !st.NextRotationAt.Equal(&metav1.Time{Time: st.CurrentSince.Add(time.Hour)}) {
		t.Fatalf("currentSince %v, nextRotationAt %v; want the next rotation an hour after the current credentials", st.CurrentSince, st.NextRotationAt)
	}
}

// TestTransitionClearsPhaseProblem: the write that completes a rotation
// also clears the Degraded condition the Distributed phase had (here
// AfterRollout held with no consumers, then discarded by hand), even when
// the reconcile's last write (observe's) has not happened yet: no reader sees
// an Idle set still Degraded for a reason of the phase it left.
func TestTransitionClearsPhaseProblem(t *testing.T) {
	g := newRig(t, overlap, false)
	cs := g.set()
	cs.Spec.Rotation.DiscardPolicy = v1.DiscardAfterRollout
	if err := g.kc.Update(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	fromDistributed(g)
	c := meta.FindStatusCondition(g.set().Status.Conditions, reason.CondDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(reason.AutoDiscardHeld) {
		t.Fatalf("Distributed with AfterRollout and no consumers: Degraded %+v, want True AutoDiscardHeld", c)
	}
	g.annotate(engine.DiscardAnnotation, "r2")
	// The status as the write that completed the rotation left it: later
	// writes of the same reconcile must not be needed to correct it.
	var first *v1.CredentialSetStatus
	g.r.Client = interceptor.NewClient(g.kc.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := c.SubResource(sub).Patch(ctx, obj, p, opts...); err != nil {
				return err
			}
			now := &v1.CredentialSet{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), now); err == nil && first == nil && now.Status.Phase == v1.PhaseIdle && now.Status.KeyGeneration == 2 {
				first = now.Status.DeepCopy()
			}
			return nil
		},
	})
	for i := 0; i < 5 && first == nil; i++ { // Discarding, then Confirming
		if err := g.reconcile(); err != nil {
			t.Fatal(err)
		}
	}
	if first == nil {
		t.Fatalf("the discard did not complete the rotation: phase %s at key generation %d", g.set().Status.Phase, g.set().Status.KeyGeneration)
	}
	st := first
	for typ, want := range map[string]metav1.ConditionStatus{reason.CondDegraded: metav1.ConditionFalse, reason.CondRotating: metav1.ConditionFalse, reason.CondReady: metav1.ConditionTrue} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || c.Status != want {
			t.Errorf("Idle at generation 2: %s is %+v, want %s", typ, c, want)
		}
	}
}
