package controller

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// eventLog records the events a reconciler emits.
type eventLog struct{ got []string }

func (l *eventLog) Eventf(_ runtime.Object, _ runtime.Object, typ, why, _, note string, args ...any) {
	l.got = append(l.got, typ+" "+why+": "+fmt.Sprintf(note, args...))
}

func (l *eventLog) warnings() []string {
	var out []string
	for _, e := range l.got {
		if len(e) > 7 && e[:7] == "Warning" {
			out = append(out, e)
		}
	}
	return out
}

// TestSyncGroupsStaleAck: the last valid kubectl rekey ack stays on the set;
// when the next rotation distributes a new hash it is stale, not a mistake
// — removed without a Warning. An ack naming a hash the set never
// distributed, or a malformed one, still warns. (Before the fix every ack
// for another hash than the current one was a Warning AckIgnored.)
func TestSyncGroupsStaleAck(t *testing.T) {
	group := v1.ConsumerGroup{Name: "daemons", Members: []string{"node-1"}}
	// Rotation r1 completed at generation 2; the acker acknowledged its
	// distribution while it was Distributed, and the ack stayed.
	idle := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "set"},
		Spec:       v1.CredentialSetSpec{ConsumerGroups: []v1.ConsumerGroup{group}},
		Status:     v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, LastRotationID: "r1"},
	}
	h1 := secretHash(idle, 2)
	idle.Status.SecretHash = h1
	idle.Status.Consumers = []v1.ConsumerStatus{{Kind: v1.KindGroup, Name: "daemons", SecretHash: h1, RolledOut: true, MembersUpdated: []string{"node-1"}}}
	// Rotation r2 distributes generation 3.
	dist := idle.DeepCopy()
	dist.Status.Phase, dist.Status.RotationID, dist.Status.RotateApplied, dist.Status.TargetGeneration = v1.PhaseDistributed, "r2", true, 3
	h2 := secretHash(dist, 3)
	if h1 == h2 {
		t.Fatal("two distributions share a hash")
	}

	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, ack string
		warn      bool
	}{
		{"the previous rotation's ack, left on the set", h1 + ":node-1", false},
		{"a hash the set never distributed", "0123456789ab:node-1", true},
		{"malformed", "node-1", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := dist.DeepCopy()
			cs.Annotations = map[string]string{engine.AckAnnotationPrefix + "daemons": c.ack}
			kc := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cs.DeepCopy()).WithStatusSubresource(&v1.CredentialSet{}).Build()
			if err := kc.Get(context.Background(), client.ObjectKeyFromObject(cs), cs); err != nil {
				t.Fatal(err)
			}
			ev := &eventLog{}
			r := &Reconciler{Client: kc, Recorder: ev}
			got := r.syncGroups(context.Background(), cs, cs.Status, secretHash(cs, r.servedGeneration(cs)))
			if len(got) != 1 || got[0].RolledOut || got[0].Coverage != "0/1" {
				t.Fatalf("the group's coverage for the new distribution: %+v", got)
			}
			if w := ev.warnings(); (len(w) > 0) != c.warn {
				t.Fatalf("want a Warning: %v; events: %v", c.warn, ev.got)
			}
			left := &v1.CredentialSet{}
			if err := kc.Get(context.Background(), client.ObjectKeyFromObject(cs), left); err != nil {
				t.Fatal(err)
			}
			if _, ok := left.Annotations[engine.AckAnnotationPrefix+"daemons"]; ok {
				t.Fatal("an ack that does not count must be removed")
			}
		})
	}
}
