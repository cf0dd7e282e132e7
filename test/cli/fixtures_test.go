package cli

// Fixtures: namespaces, sets and their Secrets, and the operator played by
// the test (status through the subresource, Events).

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
)

var nsSeq atomic.Int32

// namespace creates a namespace of the test's own.
func namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("cli-%d", nsSeq.Add(1))
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// newSet creates a set of two external instances with users orders and
// billing (admin ops-admin, not rotated), distributing to ns/<name>-db and
// restarting Deployment orders-api; and the distribution Secret holding a
// random password per user, as the operator would have written it.
// It returns the passwords by Secret key.
func newSet(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{
				Instances: v1.MySQLInstances{Hosts: []string{"db-0.example.internal:3306", "db-1.example.internal:3306"}},
				Admin:     v1.MySQLAdmin{User: "ops-admin", PasswordSecretRef: &v1.SecretKeyRef{Name: name + "-admin", Key: "password"}},
				Users:     []v1.MySQLUser{{Name: "orders"}, {Name: "billing", Host: "10.%"}},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-db"}},
			Consumers:    []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "orders-api"}},
		},
	}
	if err := k8s.Create(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	pws := map[string]string{"ORDERS_PASSWORD": password(), "BILLING_PASSWORD": password()}
	data := map[string][]byte{}
	for k, v := range pws {
		data[k] = []byte(v)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-db"}, Data: data},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-admin"}, Data: map[string][]byte{"password": []byte(password())}},
	} {
		if err := k8s.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	return pws
}

func getSet(t *testing.T, ns, name string) *v1.CredentialSet {
	t.Helper()
	cs := &v1.CredentialSet{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

// status plays the operator: it sets the status through the subresource.
func status(t *testing.T, ns, name string, st v1.CredentialSetStatus) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cs := getSet(t, ns, name)
		cs.Status = st
		return k8s.Status().Update(context.Background(), cs)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func idleAt(gen int64) v1.CredentialSetStatus {
	since := metav1.NewTime(time.Now().Add(-5 * time.Hour))
	return v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: gen, CurrentSince: &since, ConsumersUpdated: "1/1"}
}

func distributedAt(gen int64, id string) v1.CredentialSetStatus {
	st := idleAt(gen)
	st.Phase, st.RotationID, st.RotateApplied, st.ConsumersUpdated = v1.PhaseDistributed, id, true, "0/1"
	return st
}

// warn plays the operator's events.k8s.io recorder: a Warning about the set.
func warn(t *testing.T, ns, name, reason, note string) {
	t.Helper()
	event(t, ns, name, corev1.EventTypeWarning, reason, note)
}

// normal plays the operator's events.k8s.io recorder: a Normal Event.
func normal(t *testing.T, ns, name, reason, note string) {
	t.Helper()
	event(t, ns, name, corev1.EventTypeNormal, reason, note)
}

func event(t *testing.T, ns, name, typ, reason, note string) {
	t.Helper()
	cs := getSet(t, ns, name)
	e := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, GenerateName: name + "-"},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "rekey.io/manager", ReportingInstance: "rekey-test",
		Action: "Reconcile", Reason: reason, Type: typ, Note: note,
		Regarding: corev1.ObjectReference{APIVersion: v1.GroupVersion.String(), Kind: "CredentialSet",
			Namespace: ns, Name: name, UID: cs.UID},
	}
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

// annotationAppears waits until the set carries annotation key (written by
// a run in the background) and returns its value.
func annotationAppears(t *testing.T, r *running, ns, name, key string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if v := getSet(t, ns, name).Annotations[key]; v != "" {
			return v
		}
		select {
		case res := <-r.done:
			t.Fatalf("the command ended before writing %s:\n%s", key, res)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written within 20s", key)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func contains(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}
