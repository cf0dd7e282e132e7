package e2e

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/mocokube"
	"rekey.io/rekey/internal/backend/mysqlkube"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

func mocoSpecSet(ns, cluster string) *v1.CredentialSet {
	return &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moco"},
		Spec: v1.CredentialSetSpec{
			MySQL:     &v1.MySQLSpec{MOCO: &v1.MOCOSpec{ClusterName: cluster}},
			Consumers: []v1.ConsumerRef{{Kind: v1.KindStatefulSet, Name: "moco-" + cluster}},
		},
	}
}

// TestAdmissionMOCO: a mysql.moco set takes everything from MOCO, so the
// API server refuses the fields that would contradict it, and a set that
// does not restart MOCO's StatefulSet; each message says what to fix.
func TestAdmissionMOCO(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name   string
		mutate func(*v1.CredentialSet)
		want   string
	}{
		{"instances as well", func(cs *v1.CredentialSet) {
			cs.Spec.MySQL.Instances = v1.MySQLInstances{Hosts: []string{"db:3306"}}
		}, "set either mysql.instances or mysql.moco"},
		{"an admin", func(cs *v1.CredentialSet) { cs.Spec.MySQL.Admin = v1.MySQLAdmin{User: "root"} }, "remove mysql.admin, mysql.adoptSecretRef and mysql.users"},
		{"an adoption Secret", func(cs *v1.CredentialSet) { cs.Spec.MySQL.AdoptSecretRef = &v1.LocalSecretRef{Name: "x"} }, "adopts all 8 passwords from MOCO's own Secret"},
		{"application users", func(cs *v1.CredentialSet) { cs.Spec.MySQL.Users = []v1.MySQLUser{{Name: "app"}} }, "in a CredentialSet of their own"},
		{"no consumers", func(cs *v1.CredentialSet) { cs.Spec.Consumers = nil }, "add {kind: StatefulSet, name: moco-<clusterName>} to spec.consumers"},
		{"another StatefulSet", func(cs *v1.CredentialSet) { cs.Spec.Consumers[0].Name = "moco-other" }, "spec.consumers"},
		{"MOCO's StatefulSet in another namespace", func(cs *v1.CredentialSet) { cs.Spec.Consumers[0].Namespace = "other" }, "spec.consumers"},
		{"a cluster name that is not a name", func(cs *v1.CredentialSet) { cs.Spec.MySQL.MOCO.ClusterName = "../db" }, "spec.mysql.moco.clusterName"},
		{"neither instances nor moco", func(cs *v1.CredentialSet) {
			cs.Spec.MySQL.MOCO, cs.Spec.MySQL.Preset = nil, "moco"
			cs.Spec.MySQL.Admin = v1.MySQLAdmin{User: "root", PasswordSecretRef: &v1.SecretKeyRef{Name: "a", Key: "p"}}
		}, "set either mysql.instances or mysql.moco"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := mocoSpecSet(ns, "db")
			c.mutate(cs)
			err := k8s.Create(ctxT(t), cs)
			if err == nil {
				t.Fatalf("admitted: %+v", cs.Spec)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("rejected with %q, want a message containing %q", err, c.want)
			}
		})
	}
	cs := mocoSpecSet(ns, "db")
	cs.Spec.MySQL.Preset = "moco"
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatalf("the README's form rejected: %v", err)
	}
}

// TestMOCOOwnRotationRefused: on a MySQLCluster whose MOCO rotates the
// system users itself (here: MOCO's rotate annotation on the cluster, as
// that MOCO's kubectl-moco writes it), rekey changes nothing and says why,
// with the Warning MOCORotatesItself and the Degraded condition.
func TestMOCOOwnRotationRefused(t *testing.T) {
	installMOCOCRDs(t)
	ns := newNamespace(t)
	if err := k8s.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mocoSystemNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	bareMySQLCluster(t, ns, "db", map[string]any{"moco.cybozu.com/password-rotate": "a-rotation-id"})
	startManager(t, cp.Config, func(r *controller.Reconciler) { r.Settings.Set(mysqlkube.FlagMOCONamespace, mocoSystemNS) })
	if err := k8s.Create(ctxT(t), mocoSpecSet(ns, "db")); err != nil {
		t.Fatal(err)
	}
	msg := waitDegraded(t, ns, "moco", reason.MOCORotatesItself)
	for _, want := range []string{"moco.cybozu.com/password-rotate", "rekey does nothing on this cluster", "kubectl moco credential rotate"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("condition message %q lacks %q", msg, want)
		}
	}
	waitEvent(t, ns, "moco", string(reason.MOCORotatesItself))
	if cs := getSet(t, ns, "moco"); cs.Status.KeyGeneration != 0 {
		t.Fatalf("the set provisioned: %s", stateOf(cs))
	}
	var list corev1.SecretList
	if err := k8s.List(ctxT(t), &list); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if s.Annotations[naming.CredentialSetAnnot] == ns+"/moco" || s.Annotations[mocokube.ClaimAnnotation] != "" {
			t.Fatalf("rekey wrote Secret %s/%s for a cluster it must leave alone", s.Namespace, s.Name)
		}
	}
}

// bareMySQLCluster is a MySQLCluster with the least spec MOCO's CRD takes.
func bareMySQLCluster(t testing.TB, ns, name string, annotations map[string]any) {
	t.Helper()
	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
		"metadata": map[string]any{"namespace": ns, "name": name, "annotations": annotations},
		"spec": map[string]any{
			"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "mysqld", "image": "mysql"}}}},
			"volumeClaimTemplates": []any{map[string]any{"metadata": map[string]any{"name": "mysql-data"},
				"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}},
		},
	}}
	if err := k8s.Create(ctxT(t), mc); err != nil {
		t.Fatal(err)
	}
}

// TestMOCOTrust: a moco set does nothing without the operator's
// --moco-namespace (MOCONotReady), and never reads or writes a Secret in
// MOCO's namespace that is not MOCO's controller Secret of the set's own
// cluster (here: one whose labels name another namespace's cluster, as a
// tenant of that namespace could not make but a mix-up could), NotOwned.
func TestMOCOTrust(t *testing.T) {
	installMOCOCRDs(t)
	if err := k8s.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mocoSystemNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Run("no --moco-namespace", func(t *testing.T) {
		ns := newNamespace(t)
		bareMySQLCluster(t, ns, "db", nil)
		startManager(t, cp.Config)
		if err := k8s.Create(ctxT(t), mocoSpecSet(ns, "db")); err != nil {
			t.Fatal(err)
		}
		if msg := waitDegraded(t, ns, "moco", reason.MOCONotReady); !strings.Contains(msg, "--moco-namespace") {
			t.Fatalf("the refusal does not name the flag: %s", msg)
		}
	})
	t.Run("not MOCO's Secret", func(t *testing.T) {
		ns := newNamespace(t)
		bareMySQLCluster(t, ns, "db", nil)
		data := map[string][]byte{}
		for _, k := range []string{"ADMIN_PASSWORD", "AGENT_PASSWORD", "REPLICATION_PASSWORD", "CLONE_DONOR_PASSWORD", "EXPORTER_PASSWORD", "BACKUP_PASSWORD", "READONLY_PASSWORD", "WRITABLE_PASSWORD"} {
			data[k] = []byte("kept-" + strings.ToLower(k))
		}
		foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: mocoSystemNS, Name: "mysql-" + ns + ".db",
			Labels: map[string]string{"app.kubernetes.io/name": "mysql", "app.kubernetes.io/instance": "db",
				"app.kubernetes.io/created-by": "moco", "app.kubernetes.io/instance-namespace": "someone-else"},
			Annotations: map[string]string{"moco.cybozu.com/secret-version": "1"}}, Data: data}
		if err := k8s.Create(ctxT(t), foreign); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctxT(t), foreign) })
		before := foreign.ResourceVersion
		startManager(t, cp.Config, func(r *controller.Reconciler) { r.Settings.Set(mysqlkube.FlagMOCONamespace, mocoSystemNS) })
		if err := k8s.Create(ctxT(t), mocoSpecSet(ns, "db")); err != nil {
			t.Fatal(err)
		}
		msg := waitDegraded(t, ns, "moco", reason.NotOwned)
		if !strings.Contains(msg, "instance-namespace") {
			t.Fatalf("the refusal does not say what is wrong: %s", msg)
		}
		after := &corev1.Secret{}
		if err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(foreign), after); err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != before || after.Annotations[mocokube.ClaimAnnotation] != "" {
			t.Fatal("rekey changed a Secret that is not MOCO's controller Secret of this cluster")
		}
		if cs := getSet(t, ns, "moco"); cs.Status.KeyGeneration != 0 {
			t.Fatalf("the set provisioned from a Secret that is not MOCO's: %s", stateOf(cs))
		}
	})
}
