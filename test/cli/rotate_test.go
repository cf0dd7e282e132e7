package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestRotateWritesUUIDAnnotation(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	status(t, ns, "orders", idleAt(3))
	kc := in(t, ns)

	r := kc.ok(t, "rotate", "orders")
	id := getSet(t, ns, "orders").Annotations["rekey.io/rotate"]
	if u, err := uuid.Parse(id); err != nil || u.Version() != 4 || u.String() != id {
		t.Fatalf("rekey.io/rotate=%q is not a canonical random UUID (%v)", id, err)
	}
	want := "rotation " + id + " requested for credentialset " + ns + "/orders\n" +
		"follow it with: kubectl rekey status orders -n " + ns + "\n"
	if r.stdout != want || r.stderr != "" {
		t.Errorf("stdout %q, stderr %q; want stdout %q", r.stdout, r.stderr, want)
	}

	// The operator has not picked the request up: a second rotate must not
	// overwrite it.
	kc.fails(t, `credentialset "orders" already has rotation request `+id+" that the operator has not started yet", "rotate", "orders")
	if got := getSet(t, ns, "orders").Annotations["rekey.io/rotate"]; got != id {
		t.Fatalf("a refused rotate replaced the request %s with %s", id, got)
	}

	// Once that rotation completed (lastRotationID), its annotation is stale
	// and a new rotation gets a new UUID.
	st := idleAt(4)
	st.LastRotationID = id
	status(t, ns, "orders", st)
	kc.ok(t, "rotate", "orders")
	if next := getSet(t, ns, "orders").Annotations["rekey.io/rotate"]; next == id || uuid.Validate(next) != nil {
		t.Fatalf("second rotation wrote %q after %q", next, id)
	}
}

func TestRotateRefusesActiveRotation(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	kc := in(t, ns)
	for _, c := range []struct {
		st   v1.CredentialSetStatus
		want string
	}{
		{v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r-1", KeyGeneration: 2},
			`credentialset "orders" is not Idle: rotation r-1 is active (phase Rotating, new passwords are being applied)`},
		{distributedAt(2, "r-1"),
			`credentialset "orders" is not Idle: rotation r-1 is active (phase Distributed); finish it with kubectl rekey discard orders before rotating again`},
	} {
		status(t, ns, "orders", c.st)
		before := getSet(t, ns, "orders").ResourceVersion
		kc.fails(t, c.want, "rotate", "orders")
		kc.fails(t, c.want, "rotate", "orders", "--dry-run")
		kc.fails(t, c.want, "rotate", "orders", "--wait", "--timeout", "5s")
		if after := getSet(t, ns, "orders"); after.ResourceVersion != before || after.Annotations["rekey.io/rotate"] != "" {
			t.Fatalf("a refused rotate changed the set: resourceVersion %s -> %s, annotations %v", before, after.ResourceVersion, after.Annotations)
		}
	}
}

func TestRotateDryRunPrintsPlanChangesNothing(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	kc := in(t, ns)

	// External hosts, idle at generation 7.
	newSet(t, ns, "orders")
	status(t, ns, "orders", idleAt(7))
	before := getSet(t, ns, "orders").ResourceVersion
	r := kc.ok(t, "rotate", "orders", "--dry-run")
	if after := getSet(t, ns, "orders"); after.ResourceVersion != before || len(after.Annotations) != 0 {
		t.Fatalf("--dry-run changed the set: resourceVersion %s -> %s, annotations %v", before, after.ResourceVersion, after.Annotations)
	}
	if r.stderr != "" {
		t.Errorf("--dry-run wrote to stderr: %q", r.stderr)
	}
	contains(t, "plan", r.stdout,
		"Dry run: nothing was changed. A rotation of credentialset "+ns+"/orders would move generation 7 to 8.\n",
		"Instances (2, each gets ALTER USER ... RETAIN CURRENT PASSWORD",
		"  db-0.example.internal:3306\n  db-1.example.internal:3306\n",
		"Users (2):\n",
		"  orders@%",
		"key ORDERS_PASSWORD",
		"  billing@10.%",
		"key BILLING_PASSWORD",
		"Secrets to update:\n",
		"  source Secret rekey."+ns+".orders in the operator's namespace",
		"  "+ns+"/orders-db\n",
		"Workloads to restart:\n",
		"  Deployment "+ns+"/orders-api (not found: discard would wait for it forever)\n",
		"Then: once consumers rolled out and work, run kubectl rekey discard orders -n "+ns+" (discardPolicy Manual).\n",
	)
	if strings.Contains(r.stdout, "rekey connects as this user") {
		t.Errorf("the admin ops-admin is not rotated, yet the plan marks a user as it:\n%s", r.stdout)
	}

	// A StatefulSet of 3 (its Service from the StatefulSet), AfterRollout,
	// never provisioned: the plan names what the operator would derive.
	labels := map[string]string{"app": "moco"}
	if err := k8s.Create(context.Background(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moco-shop"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(3)), ServiceName: "moco-shop-headless",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysqld", Image: "mysql:9.7"}}},
			},
		},
	}); err != nil {
		t.Fatal(err)
	}
	moco := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moco"},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{
				Instances: v1.MySQLInstances{StatefulSet: &v1.StatefulSetInstances{Name: "moco-shop", Port: 3307}},
				Admin:     v1.MySQLAdmin{User: "moco-admin"},
				Preset:    "moco",
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: "moco-creds"}},
			Consumers:    []v1.ConsumerRef{{Kind: v1.KindStatefulSet, Name: "moco-shop"}},
			Rotation:     v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout},
		},
	}
	if err := k8s.Create(context.Background(), moco); err != nil {
		t.Fatal(err)
	}
	r = kc.ok(t, "rotate", "moco", "--dry-run")
	contains(t, "plan", r.stdout,
		"Credentialset "+ns+"/moco is not provisioned yet: the operator provisions generation 1 first, then this rotation makes generation 2.\n",
		"Instances (3,",
		"  moco-shop-0.moco-shop-headless."+ns+".svc:3307\n",
		"  moco-shop-2.moco-shop-headless."+ns+".svc:3307\n",
		"Users (8):\n",
		"key ADMIN_PASSWORD  (rekey connects as this user)",
		"  StatefulSet "+ns+"/moco-shop\n",
		"Then: the old passwords are discarded automatically once every consumer rolled out and the grace period passed (discardPolicy AfterRollout).\n",
	)
	if strings.Contains(r.stdout, "not found") {
		t.Errorf("the StatefulSet exists, yet the plan says not found:\n%s", r.stdout)
	}
	if len(getSet(t, ns, "moco").Annotations) != 0 {
		t.Fatal("--dry-run annotated the set")
	}
}

func TestRotateFlagConflicts(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	newSet(t, ns, "orders")
	status(t, ns, "orders", idleAt(1))
	kc := in(t, ns)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rotate", "orders", "--dry-run", "--wait"}, "--dry-run changes nothing, so there is nothing to --wait for: drop one of them"},
		{[]string{"rotate", "orders", "--timeout", "1m"}, "--timeout only applies with --wait: add --wait"},
		{[]string{"rotate", "orders", "--wait", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"rotate", "orders", "--wait", "--timeout", "soon"}, `invalid argument "soon" for "--timeout"`},
		{[]string{"discard", "orders", "--timeout", "1m"}, "--timeout only applies with --wait: add --wait"},
	} {
		kc.fails(t, c.want, c.args...)
	}
	if len(getSet(t, ns, "orders").Annotations) != 0 {
		t.Fatal("a refused command annotated the set")
	}
}
