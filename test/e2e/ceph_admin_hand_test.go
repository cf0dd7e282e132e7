package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestCephAdminHandAfterStep8: a set that rotates rekey's own admin entity;
// the real manager is SIGKILLed right after the admin rotation's step 8
// (the rotator removed, the admin's new keyring stored, the rotator's
// keyring Secret not yet deleted: step 9), then a person rotates the
// admin's key by hand on the mon (`ceph auth rotate`). A fresh manager's
// recovery is refused with a Warning AuthenticationFailed naming the admin
// keyring Secret and `ceph auth get`, saying the stored rotator keyring is
// refused too, and changes nothing; once the person puts the admin's
// current keyring in that Secret (and annotates the set, as the refusal
// says), the recovery deletes the rotator keyring
// (step 9), the rotation adopts the person's key and the set is Idle with
// it. Before, every reconcile retried step 3 with the removed rotator's
// keyring (BackendError, "the stored rotator keyring finishes it on the
// next reconcile") and never named the admin keyring Secret
// (internal/explorer TestCephAdminHand, ceph TestAdminRotatedByHand).
func TestCephAdminHandAfterStep8(t *testing.T) {
	c := testenv.CephForTest(t)
	ns := newNamespace(t)
	const name, fp = "selfhand", "ceph-admin/step-8"
	cs := cephSet(t, c, ns, name, v1.CephInPlace, v1.CephEntity{Name: cephAdminEntity, Caps: adminCaps})
	cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout, GracePeriod: &metav1.Duration{Duration: time.Second}}
	cs.Spec.ConsumerGroups = []v1.ConsumerGroup{ackerGroup("node-1")}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	deleteAtEnd(t, cs)
	ackEveryDistribution(t, ns, name, "node-1")
	adminSecret := cs.Spec.Ceph.Admin.KeyringSecretRef.Name
	flags := []string{"--ceph-work-dir", c.Dir.Host, "--ceph-cli", c.CLIPath}

	m := startManagerProcessWith(t, "", flags...)
	before := assertCephSecrets(t, c, waitPhase(t, ns, name, v1.PhaseIdle, 1), cephAdminEntity)[cephAdminEntity]
	m.stop()

	m = startManagerProcessWith(t, fp, flags...)
	rotate(t, ns, name, "r1")
	m.waitKilled(t, fp)
	if _, ok := monKeys(t, c)[ceph.RotatorEntity]; ok || len(rotatorKeyring(t, ns, adminSecret)) == 0 || storedKeyringAdministers(t, c, ns, adminSecret) != cephAdminEntity {
		t.Fatalf("killed at %s: want the rotator removed, its keyring stored, the admin's new keyring stored and working", fp)
	}
	handRotate(t, c, cephAdminEntity)
	hand := monKeys(t, c)[cephAdminEntity]
	if _, key := keyOf(t, secretData(t, ns, adminSecret)["keyring"]); administers(t, c, cephAdminEntity, key) {
		t.Fatal("the admin keyring Secret still administers the mon after the person's rotation")
	}

	refusedAt := time.Now()
	m = startManagerProcessWith(t, "", flags...)
	note := waitEventNoting(t, ns, name, reason.AuthenticationFailed, ceph.RotatorEntity+" keyring is refused too")
	mustContain(t, "the recovery's refusal", note, "Secret "+adminSecret+" key keyring", "ceph auth get "+cephAdminEntity, "rekey.io/retry=1")
	if typ := eventType(t, ns, name, reason.AuthenticationFailed); typ != corev1.EventTypeWarning {
		t.Fatalf("the refusal is a %s event, want Warning", typ)
	}
	if mon := monKeys(t, c); mon[cephAdminEntity] != hand || mon[ceph.RotatorEntity] != "" || len(rotatorKeyring(t, ns, adminSecret)) == 0 {
		t.Fatal("the refused recovery changed the mon or deleted the rotator keyring")
	}
	if st := getSet(t, ns, name).Status; st.Phase != v1.PhaseRotating || st.KeyGeneration != 1 {
		t.Fatalf("the refused recovery moved the set: %+v", st)
	}
	if n := eventsSince(t, ns, name, reason.AdminRotationFailed, refusedAt); n != 0 {
		t.Fatalf("%d AdminRotationFailed events: the removed rotator finishes nothing", n)
	}

	// The way out the refusal names.
	putBackAt := time.Now()
	setAdminKeyring(t, ns, adminSecret, ceph.Keyring{Entity: cephAdminEntity, Key: hand}.String())
	annotate(t, ns, name, "rekey.io/retry", "1") // as the refusal says: rekey holds off a refused key until the set changes
	mustContain(t, "the recovery", waitEventSince(t, ns, name, string(reason.AdminRotationRecovered), putBackAt), "deleted it")
	got := assertCephSecrets(t, c, waitPhase(t, ns, name, v1.PhaseIdle, 2), cephAdminEntity)[cephAdminEntity]
	if got != hand || got == before {
		t.Fatal("generation 2 is not the person's key")
	}
	if _, key := keyOf(t, secretData(t, ns, adminSecret)["keyring"]); key != hand || !administers(t, c, cephAdminEntity, key) {
		t.Fatal("the admin keyring Secret does not hold the admin's working key")
	}
	if _, ok := monKeys(t, c)[ceph.RotatorEntity]; ok || len(rotatorKeyring(t, ns, adminSecret)) != 0 {
		t.Fatal("something of the rotator outlived the recovery")
	}
	m.stop()
}

// setAdminKeyring is the person putting keyring in the admin keyring Secret.
func setAdminKeyring(t *testing.T, ns, name, keyring string) {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	s.Data["keyring"] = []byte(keyring)
	if err := k8s.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	observed(t, "the admin's current keyring put in Secret %s", name)
}

// eventType is the type of the set's first Event with reason why.
func eventType(t *testing.T, ns, name string, why reason.Reason) string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == string(why) {
			return e.Type
		}
	}
	return ""
}

// eventsSince counts the set's Events with reason why emitted after since
// (or folded into a series observed after it).
func eventsSince(t *testing.T, ns, name string, why reason.Reason, since time.Time) int {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		at := e.EventTime.Time
		if e.Series != nil && e.Series.LastObservedTime.After(at) {
			at = e.Series.LastObservedTime.Time
		}
		if e.Regarding.Name == name && e.Reason == string(why) && at.After(since) {
			n++
		}
	}
	return n
}
