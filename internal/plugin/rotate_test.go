package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

func TestRotateWritesUUIDAnnotation(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(1))

	out, _, err := kubectl(t, ns, "rotate", "orders")
	if err != nil {
		t.Fatal(err)
	}
	id := get(t, ns, "orders").Annotations[engine.RotateAnnotation]
	if _, perr := uuid.Parse(id); perr != nil {
		t.Fatalf("annotation %s=%q is not a UUID: %v", engine.RotateAnnotation, id, perr)
	}
	hasLine(t, out, "rotation "+id+" requested for credentialset "+ns+"/orders")

	// The request is now pending: a second rotate must not overwrite it.
	mustFail(t, ns, "already has rotation request "+id, "rotate", "orders")
}

func TestRotateRefusesUnlessIdle(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		st.Phase, st.RotationID, st.KeyGeneration = v1.PhaseRotating, "r-1", 1
	})
	mustFail(t, ns, `credentialset "orders" is not Idle: rotation r-1 is active (phase Rotating`, "rotate", "orders")
	mustFail(t, ns, "is not Idle", "rotate", "orders", "--dry-run")

	setStatus(t, ns, "orders", distributed("r-1"))
	mustFail(t, ns, "rotation r-1 is active (phase Distributed); finish it with kubectl rekey discard orders", "rotate", "orders")
	if _, ok := get(t, ns, "orders").Annotations[engine.RotateAnnotation]; ok {
		t.Fatal("a refused rotate wrote the annotation")
	}
}

func TestRotateDryRunPrintsPlanAndChangesNothing(t *testing.T) {
	ns := namespace(t)
	labels := map[string]string{"app": "moco"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moco-shop"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(3)), ServiceName: "moco-shop-headless",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysqld", Image: "mysql:9.7"}}},
			},
		},
	}
	if err := k8s.Create(context.Background(), sts); err != nil {
		t.Fatal(err)
	}
	create(t, &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moco"},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{
				Instances: v1.MySQLInstances{StatefulSet: &v1.StatefulSetInstances{Name: "moco-shop"}},
				Admin:     v1.MySQLAdmin{User: "moco-admin"},
				Preset:    "moco",
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: "moco-shop-credentials"}, {Namespace: "other", Name: "copy"}},
			Consumers:    []v1.ConsumerRef{{Kind: v1.KindStatefulSet, Name: "moco-shop"}, {Kind: v1.KindDeployment, Namespace: "apps", Name: "shop-api"}},
		},
	})
	setStatus(t, ns, "moco", idle(4))
	before := get(t, ns, "moco").ResourceVersion

	out, _, err := kubectl(t, ns, "rotate", "moco", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	after := get(t, ns, "moco")
	if after.ResourceVersion != before || after.Annotations[engine.RotateAnnotation] != "" {
		t.Fatalf("--dry-run changed the set: resourceVersion %s -> %s, annotations %v", before, after.ResourceVersion, after.Annotations)
	}
	want := []string{
		"Dry run: nothing was changed. A rotation of credentialset " + ns + "/moco would move generation 4 to 5.",
		"Instances (3, each gets ALTER USER ... RETAIN CURRENT PASSWORD; role read live by the operator):",
		"  moco-shop-0.moco-shop-headless." + ns + ".svc:3306",
		"  moco-shop-1.moco-shop-headless." + ns + ".svc:3306",
		"  moco-shop-2.moco-shop-headless." + ns + ".svc:3306",
		"Users (8):",
		"Secrets to update:",
		"  source Secret rekey." + ns + ".moco in the operator's namespace (new passwords are stored there first)",
		"  " + ns + "/moco-shop-credentials",
		"  other/copy",
		"Workloads to restart:",
		"  StatefulSet " + ns + "/moco-shop",
		"  Deployment apps/shop-api (not found: discard would wait for it forever)",
		"Then: once consumers rolled out and work, run kubectl rekey discard moco -n " + ns + " (discardPolicy Manual).",
	}
	for _, w := range want {
		hasLine(t, out, w)
	}
	for _, u := range []string{"moco-admin", "moco-agent", "moco-repl", "moco-clone-donor", "moco-exporter", "moco-backup", "moco-readonly", "moco-writable"} {
		if !strings.Contains(out, "  "+u+"@%") {
			t.Errorf("plan lacks user %s:\n%s", u, out)
		}
	}
	if !strings.Contains(out, "key ADMIN_PASSWORD  (rekey connects as this user)") {
		t.Errorf("plan does not mark the admin user:\n%s", out)
	}

	// Hosts are listed as given; the second form of the plan.
	create(t, hostsSet(ns, "orders"))
	out, _, err = kubectl(t, ns, "rotate", "orders", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	hasLine(t, out, "Dry run: nothing was changed. Credentialset "+ns+"/orders is not provisioned yet: the operator provisions generation 1 first, then this rotation makes generation 2.")
	hasLine(t, out, "  db-1.example.internal:3307")
	hasLine(t, out, "  orders@%  key ORDERS_PASSWORD")
}

func TestUnknownSetAndWrongUse(t *testing.T) {
	ns := namespace(t)
	want := `credentialset "nope" not found in namespace "` + ns + `"`
	for _, args := range [][]string{{"rotate", "nope"}, {"discard", "nope"}, {"status", "nope"}, {"show", "nope"}} {
		mustFail(t, ns, want, args...)
	}
	mustFail(t, ns, "rotate needs the name of a CredentialSet", "rotate")
	mustFail(t, ns, "--timeout only applies with --wait", "rotate", "x", "--timeout", "1m")
	mustFail(t, ns, "drop one of them", "rotate", "x", "--dry-run", "--wait")

	// Main prints the error once, prefixed, and exits 1.
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"--kubeconfig", cp.Kubeconfig, "-n", ns, "rotate", "nope"}, Options{Out: &out, Err: &errOut})
	if code != 1 || !strings.HasPrefix(errOut.String(), "error: "+want) || out.Len() != 0 {
		t.Fatalf("Main = %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
