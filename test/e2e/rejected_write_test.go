package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestRejectedWriteIsReported: a 422 that is not a lost race —
// here a ValidatingAdmissionPolicy on the real API server refusing the
// status write that starts a rotation — is reported as a Warning
// WriteRejected with the server's message and Degraded=True, and retried
// with a back-off, not every 100 ms in silence as a lost compare-and-set.
// Once the policy is gone the rotation goes ahead.
func TestRejectedWriteIsReported(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{NoReplicas: true})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	cs := appUserSet(t, ns, "billing", c)
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "billing", v1.PhaseIdle, 1)

	// The policy refuses any status write of a set in this namespace that
	// enters Rotating: a validation failure, not a race.
	name := "deny-rotating-" + ns
	fail := admv1.Fail
	pol := &admv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admv1.MatchResources{ResourceRules: []admv1.NamedRuleWithOperations{{
				RuleWithOperations: admv1.RuleWithOperations{
					Operations: []admv1.OperationType{admv1.Update},
					Rule:       admv1.Rule{APIGroups: []string{"rekey.io"}, APIVersions: []string{"*"}, Resources: []string{"credentialsets/status"}},
				}}}},
			Validations: []admv1.Validation{{
				Expression: "!has(object.status.phase) || object.status.phase != 'Rotating'",
				Message:    "test policy: rotations are frozen in this namespace",
			}},
		},
	}
	bind := &admv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admv1.ValidationAction{admv1.Deny},
			MatchResources: &admv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	if err := k8s.Create(ctxT(t), pol); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctxT(t), bind); err != nil {
		t.Fatal(err)
	}
	removed := false
	remove := func() {
		if removed {
			return
		}
		removed = true
		_ = k8s.Delete(context.Background(), bind)
		_ = k8s.Delete(context.Background(), pol)
	}
	t.Cleanup(remove)
	// The policy takes effect once the API server's informer saw it:
	// probe with a status write of our own until it is refused.
	eventually(t, 30*time.Second, "the policy refuses status writes entering Rotating", func() (bool, string) {
		probe := getSet(t, ns, "billing")
		probe.Status.Phase = v1.PhaseRotating
		err := k8s.Status().Update(context.Background(), probe, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "rotations are frozen"), fmt.Sprint(err)
	})

	rotate(t, ns, "billing", "frozen-1")
	note := waitEvent(t, ns, "billing", string(reason.WriteRejected))
	mustContain(t, "WriteRejected event", note, "rotations are frozen")
	eventually(t, 30*time.Second, "Degraded=True WriteRejected", func() (bool, string) {
		cs := getSet(t, ns, "billing")
		d := condition(cs, "Degraded")
		return d != nil && d.Status == metav1.ConditionTrue && d.Reason == string(reason.WriteRejected) &&
			strings.Contains(d.Message, "rotations are frozen"), stateOf(cs)
	})
	if p := getSet(t, ns, "billing").Status.Phase; p != v1.PhaseIdle {
		t.Fatalf("phase %s although the write was refused", p)
	}
	// Backed off: a handful of attempts in 15 s, not one every 100 ms.
	before := eventCount(t, ns, "billing", string(reason.WriteRejected))
	time.Sleep(15 * time.Second)
	if n := eventCount(t, ns, "billing", string(reason.WriteRejected)) - before; n > 4 {
		t.Fatalf("the refused write was retried %d times in 15 s: no back-off", n)
	}

	remove()
	waitPhase(t, ns, "billing", v1.PhaseDistributed, 1)
}

// eventCount is how many times Events with reason were emitted about the
// set (a folded series counts each occurrence).
func eventCount(t testing.TB, ns, name, why string) int {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == why {
			if e.Series != nil {
				n += int(e.Series.Count)
			} else {
				n++
			}
		}
	}
	return n
}
