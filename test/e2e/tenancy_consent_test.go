package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/tenancy"
	"rekey.io/rekey/internal/testenv"
)

// TestCrossNamespaceConsent: a cross-namespace target works once its
// namespace's owners consent, and stops receiving writes when they revoke.
func TestCrossNamespaceConsent(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	ns, other := newNamespace(t), newNamespace(t)
	alice := tenantClient(t, "tenant-bob", ns)
	installNamespacePolicy(t, alice, ns)
	startManager(t, asManagerServiceAccount(cp.Config))
	ctx := ctxT(t)

	// The author must hold the rights in the other namespace: bob does not.
	cs := mocoSet(t, ns, "shared", c)
	cs.Spec.Distribution = append(cs.Spec.Distribution, v1.SecretTarget{Namespace: other, Name: "shared-creds"})
	if err := alice.Create(ctx, cs.DeepCopy()); err == nil || !strings.Contains(err.Error(), "spec.distribution") {
		t.Fatalf("bob's set with a target in %s: %v; want the admission policy's refusal", other, err)
	}
	// Once bob may write Secrets there, the policy admits it.
	_ = tenantClient(t, "tenant-bob", other)
	eventually(t, 30*time.Second, "bob's set to be admitted", func() (bool, string) {
		err := alice.Create(ctx, cs.DeepCopy())
		return err == nil, fmt.Sprint(err)
	})
	// The target namespace has not consented: nothing happens.
	msg := waitDegraded(t, ns, "shared", reason.NamespaceNotAllowed)
	if !strings.Contains(msg, tenancy.TrustAnnotation+"="+ns) || !secretAbsent(t, other, "shared-creds") {
		t.Fatalf("before consent: %q, Secret present=%v", msg, !secretAbsent(t, other, "shared-creds"))
	}
	setTrust := func(value string) {
		n := &corev1.Namespace{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: other}, n); err != nil {
			t.Fatal(err)
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		if value == "" {
			delete(n.Annotations, tenancy.TrustAnnotation)
		} else {
			n.Annotations[tenancy.TrustAnnotation] = value
		}
		if err := k8s.Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	// A tenant cannot consent on the target's behalf.
	n := &corev1.Namespace{}
	if err := alice.Get(ctx, client.ObjectKey{Name: other}, n); err == nil || !apierrors.IsForbidden(err) {
		t.Errorf("bob reading Namespace %s: %v; want Forbidden (only its owners annotate it)", other, err)
	}
	setTrust("someone-else, " + ns)
	cs = waitPhase(t, ns, "shared", v1.PhaseIdle, 1)
	eventually(t, time.Minute, "the consented target to be written", func() (bool, string) {
		return !secretAbsent(t, other, "shared-creds"), "absent"
	})
	gen1 := secretData(t, other, "shared-creds")
	if string(gen1["ADMIN_PASSWORD"]) != string(sourceData(t, cs)["ADMIN_PASSWORD"]) {
		t.Fatal("the consented target does not hold the current credentials")
	}

	// Revoked: a rotation requested afterwards writes nothing there.
	setTrust("someone-else")
	rotate(t, ns, "shared", "after-revoke")
	msg = waitDegraded(t, ns, "shared", reason.NamespaceNotAllowed)
	time.Sleep(3 * time.Second)
	if got := secretData(t, other, "shared-creds"); string(got["ADMIN_PASSWORD"]) != string(gen1["ADMIN_PASSWORD"]) || len(got) != len(gen1) {
		t.Error("the target was written after consent was revoked")
	}
	if cs := getSet(t, ns, "shared"); cs.Status.Phase != v1.PhaseIdle || cs.Status.KeyGeneration != 1 {
		t.Errorf("a rotation went ahead after consent was revoked: %s", stateOf(cs))
	}
	t.Logf("revoked: %s", msg)
}
