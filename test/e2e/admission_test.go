package e2e

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestAdmissionRejectsMalformedSpecs: the API server itself refuses bad
// CredentialSets, with a message that says what to fix.
func TestAdmissionRejectsMalformedSpecs(t *testing.T) {
	ns := newNamespace(t)
	good := func() *v1.CredentialSet {
		return &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bad-"},
			Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{
				Instances: v1.MySQLInstances{Hosts: []string{"db-0.example:3306"}},
				Admin:     v1.MySQLAdmin{User: "admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "a", Key: "p"}},
				Users:     []v1.MySQLUser{{Name: "app"}},
			}},
		}
	}
	cases := []struct {
		name   string
		mutate func(*v1.CredentialSet)
		want   string
	}{
		{"no backend", func(cs *v1.CredentialSet) { cs.Spec.MySQL = nil }, "set exactly one backend block"},
		{"neither preset nor users", func(cs *v1.CredentialSet) { cs.Spec.MySQL.Users = nil }, "name the users to rotate"},
		{"unknown preset", func(cs *v1.CredentialSet) { cs.Spec.MySQL.Users = nil; cs.Spec.MySQL.Preset = "vitess" }, `supported values: "moco"`},
		{"hosts and statefulSet", func(cs *v1.CredentialSet) {
			cs.Spec.MySQL.Instances.StatefulSet = &v1.StatefulSetInstances{Name: "db"}
		}, "set either instances.statefulSet or instances.hosts"},
		{"host without port", func(cs *v1.CredentialSet) { cs.Spec.MySQL.Instances.Hosts = []string{"db-0"} }, "spec.mysql.instances.hosts[0]"},
		{"SQL in a user name", func(cs *v1.CredentialSet) { cs.Spec.MySQL.Users[0].Name = "x'; DROP USER root; --" }, "spec.mysql.users[0].name"},
		{"secretKey taken by rekey", func(cs *v1.CredentialSet) { cs.Spec.MySQL.Users[0].SecretKey = "APP_PENDING" }, "must not end in _PENDING"},
		{"grant on a bad object", func(cs *v1.CredentialSet) {
			cs.Spec.MySQL.Users[0].Grants = []v1.MySQLGrant{{Privileges: []string{"SELECT"}, Object: "app"}}
		}, "spec.mysql.users[0].grants[0].object"},
		{"grace period with Manual", func(cs *v1.CredentialSet) {
			cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardManual, GracePeriod: &metav1.Duration{}}
		}, "gracePeriod applies only to discardPolicy AfterRollout"},
		{"unknown consumer kind", func(cs *v1.CredentialSet) {
			cs.Spec.Consumers = []v1.ConsumerRef{{Kind: "ReplicaSet", Name: "x"}}
		}, "kind ReplicaSet: rekey restarts StatefulSet, Deployment, DaemonSet and CronJob consumers; for any other workload declare a consumerGroup"},
		{"Argo Rollout consumer", func(cs *v1.CredentialSet) {
			cs.Spec.Consumers = []v1.ConsumerRef{{Kind: "Deployment", Name: "web"}, {Kind: "Rollout", Name: "x"}}
		}, "spec.consumers[1]: Invalid value: kind Rollout: rekey does not restart Argo Rollouts or watch their rollout; declare the Rollout in spec.consumerGroups"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := good()
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
	// The well-formed spec is admitted: the cases above fail for their reason only.
	if err := k8s.Create(ctxT(t), good()); err != nil {
		t.Fatalf("well-formed spec rejected: %v", err)
	}
	withCronJob := good()
	withCronJob.Spec.Consumers = []v1.ConsumerRef{{Kind: v1.KindCronJob, Name: "report"}}
	if err := k8s.Create(ctxT(t), withCronJob); err != nil {
		t.Fatalf("a CronJob consumer rejected: %v", err)
	}
}
