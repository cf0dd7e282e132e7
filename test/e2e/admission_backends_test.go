package e2e

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestAdmissionCephRabbitMQPolicies: malformed Ceph and RabbitMQ blocks,
// rotation policies and consumer groups are refused by the API server
// with a message that says what to fix; the well-formed ones are admitted.
func TestAdmissionCephRabbitMQPolicies(t *testing.T) {
	ns := newNamespace(t)
	ceph := func() *v1.CredentialSet {
		return &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "ceph-"},
			Spec: v1.CredentialSetSpec{Ceph: &v1.CephSpec{
				Monitors: []string{"v2:10.0.0.1:3300"},
				Admin:    v1.CephAdmin{KeyringSecretRef: v1.SecretKeyRef{Name: "ceph-admin", Key: "keyring"}},
				Entities: []v1.CephEntity{{Name: "client.csi", Caps: v1.CephCaps{Mon: "profile rbd"}}},
			}},
		}
	}
	rabbit := func() *v1.CredentialSet {
		return &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "rabbit-"},
			Spec: v1.CredentialSetSpec{RabbitMQ: &v1.RabbitMQSpec{
				Endpoint: "https://rabbitmq.openstack.svc:15671",
				Admin:    v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "rabbit-admin"}},
				User:     v1.RabbitMQUser{Base: "nova", Permissions: []v1.RabbitMQPermission{{Vhost: "/", Configure: ".*", Write: ".*", Read: ".*"}}},
			}},
		}
	}
	cases := []struct {
		name   string
		base   func() *v1.CredentialSet
		mutate func(*v1.CredentialSet)
		want   string
	}{
		{"two backends", ceph, func(cs *v1.CredentialSet) { cs.Spec.RabbitMQ = rabbit().Spec.RabbitMQ }, "set exactly one backend block: spec.mysql, spec.ceph, spec.rabbitmq or spec.postgres"},
		{"keepPriorKeyCount with InPlace", ceph, func(cs *v1.CredentialSet) { cs.Spec.Ceph.KeepPriorKeyCount = ptr.To(int32(1)) }, "keepPriorKeyCount applies only to strategy Overlapping"},
		{"overlapping daemon key", ceph, func(cs *v1.CredentialSet) {
			cs.Spec.Ceph.Strategy = v1.CephOverlapping
			cs.Spec.Ceph.Entities[0].Name = "mgr.a"
		}, "only client.* entities can be"},
		{"overlapping admin", ceph, func(cs *v1.CredentialSet) {
			cs.Spec.Ceph.Strategy = v1.CephOverlapping
			cs.Spec.Ceph.Entities[0].Name = "client.admin"
		}, "the admin entity rotates in place"},
		{"bad entity name", ceph, func(cs *v1.CredentialSet) { cs.Spec.Ceph.Entities[0].Name = "client.x; rm -rf /" }, "spec.ceph.entities[0].name"},
		{"mon entity", ceph, func(cs *v1.CredentialSet) { cs.Spec.Ceph.Entities[0].Name = "mon." }, "spec.ceph.entities[0].name"},
		{"bad monitor", ceph, func(cs *v1.CredentialSet) { cs.Spec.Ceph.Monitors = []string{"http://mon:3300/"} }, "spec.ceph.monitors[0]"},
		{"config option with a newline", ceph, func(cs *v1.CredentialSet) { cs.Spec.Ceph.Config = map[string]v1.CephConfigValue{"mon host\nkey": "x"} }, "config keys are ceph option names"},
		{"unknown unused key", ceph, func(cs *v1.CredentialSet) { cs.Spec.Ceph.RemoveUnusedKeys = []string{"client.admin"} }, "spec.ceph.removeUnusedKeys[0]"},
		{"WithVersionUpgrade on Overlapping", ceph, func(cs *v1.CredentialSet) {
			cs.Spec.Ceph.Strategy = v1.CephOverlapping
			cs.Spec.Rotation.Policy = v1.PolicyWithVersionUpgrade
		}, "use KeyGeneration or Schedule with strategy Overlapping"},

		{"endpoint with a path", rabbit, func(cs *v1.CredentialSet) { cs.Spec.RabbitMQ.Endpoint = "https://rabbit:15671/api?x=1" }, "spec.rabbitmq.endpoint"},
		{"endpoint with credentials", rabbit, func(cs *v1.CredentialSet) { cs.Spec.RabbitMQ.Endpoint = "https://guest:guest@rabbit:15671" }, "spec.rabbitmq.endpoint"},
		{"user base with a generation suffix", rabbit, func(cs *v1.CredentialSet) { cs.Spec.RabbitMQ.User.Base = "nova-g2" }, "must not itself end in -g<number>"},
		{"user base with a slash", rabbit, func(cs *v1.CredentialSet) { cs.Spec.RabbitMQ.User.Base = "nova/../admin" }, "spec.rabbitmq.user.base"},
		{"transport host without port", rabbit, func(cs *v1.CredentialSet) {
			cs.Spec.RabbitMQ.TransportURL = &v1.RabbitMQTransportURL{Hosts: []string{"rabbit"}}
		}, "spec.rabbitmq.transportURL.hosts[0]"},
		{"transport query with a space", rabbit, func(cs *v1.CredentialSet) {
			cs.Spec.RabbitMQ.TransportURL = &v1.RabbitMQTransportURL{Hosts: []string{"rabbit:5672"}, Query: "ssl=1 &x"}
		}, "spec.rabbitmq.transportURL.query"},
		{"config file without transport URL", rabbit, func(cs *v1.CredentialSet) {
			cs.Spec.RabbitMQ.ConfigFile = &v1.RabbitMQConfigFile{Key: "01-nova.conf"}
		}, "configFile renders the transport_url: set transportURL too"},
		{"vhost with a control character", rabbit, func(cs *v1.CredentialSet) { cs.Spec.RabbitMQ.User.Permissions[0].Vhost = "a\nb" }, "spec.rabbitmq.user.permissions[0].vhost"},

		{"keyGeneration without its policy", rabbit, func(cs *v1.CredentialSet) { cs.Spec.Rotation.KeyGeneration = ptr.To(int64(2)) }, "keyGeneration goes with policy KeyGeneration"},
		{"KeyGeneration without keyGeneration", rabbit, func(cs *v1.CredentialSet) { cs.Spec.Rotation.Policy = v1.PolicyKeyGeneration }, "keyGeneration goes with policy KeyGeneration"},
		{"Schedule without interval", rabbit, func(cs *v1.CredentialSet) { cs.Spec.Rotation.Policy = v1.PolicySchedule }, "interval goes with policy Schedule"},
		{"interval too short", rabbit, func(cs *v1.CredentialSet) {
			cs.Spec.Rotation.Policy = v1.PolicySchedule
			cs.Spec.Rotation.Interval = &metav1.Duration{Duration: time.Minute}
		}, "interval must be at least 10m"},
		{"unknown policy", rabbit, func(cs *v1.CredentialSet) { cs.Spec.Rotation.Policy = "Always" }, `supported values: "Disabled", "KeyGeneration", "WithVersionUpgrade", "Schedule"`},
		{"group without members", rabbit, func(cs *v1.CredentialSet) {
			cs.Spec.ConsumerGroups = []v1.ConsumerGroup{{Name: "compute"}}
		}, "spec.consumerGroups[0].members"},
		{"group member with a comma", rabbit, func(cs *v1.CredentialSet) {
			cs.Spec.ConsumerGroups = []v1.ConsumerGroup{{Name: "compute", Members: []string{"a,b"}}}
		}, "spec.consumerGroups[0].members[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := c.base()
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
	goodOnes := []*v1.CredentialSet{ceph(), rabbit()}
	overlapping := ceph()
	overlapping.Spec.Ceph.Strategy, overlapping.Spec.Ceph.KeepPriorKeyCount = v1.CephOverlapping, ptr.To(int32(2))
	overlapping.Spec.Rotation = v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: ptr.To(int64(3))}
	scheduled := rabbit()
	scheduled.Spec.Rotation = v1.RotationSpec{Policy: v1.PolicySchedule, Interval: &metav1.Duration{Duration: 720 * time.Hour}}
	scheduled.Spec.ConsumerGroups = []v1.ConsumerGroup{{Name: "compute", Members: []string{"compute-0", "compute-1"}}}
	scheduled.Spec.RabbitMQ.TransportURL = &v1.RabbitMQTransportURL{Hosts: []string{"rabbit-0:5672", "rabbit-1:5672"}, Query: "ssl=1"}
	scheduled.Spec.RabbitMQ.ConfigFile = &v1.RabbitMQConfigFile{Key: "01-nova.conf"}
	for _, cs := range append(goodOnes, overlapping, scheduled) {
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Fatalf("well-formed spec rejected: %v", err)
		}
	}
}
