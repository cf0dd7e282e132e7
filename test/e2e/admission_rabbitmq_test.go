package e2e

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestAdmissionRabbitMQTransport: the API server refuses a RabbitMQ set
// whose passwords would cross the network unencrypted unless the spec says
// so in a field of its own, and every field that would contradict the
// endpoint's scheme, with a message naming the field.
func TestAdmissionRabbitMQTransport(t *testing.T) {
	ns := newNamespace(t)
	rabbit := func() *v1.CredentialSet {
		return &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "rabbit-"},
			Spec: v1.CredentialSetSpec{RabbitMQ: &v1.RabbitMQSpec{
				Endpoint: "https://rabbitmq.openstack.svc:15671",
				Admin:    v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "rabbit-admin"}},
				User:     v1.RabbitMQUser{Base: "nova"},
			}},
		}
	}
	for _, c := range []struct {
		name   string
		mutate func(*v1.CredentialSet)
		want   []string
	}{
		{"http without the opt-in", func(cs *v1.CredentialSet) { cs.Spec.RabbitMQ.Endpoint = "http://rabbitmq.openstack.svc:15672" },
			[]string{"spec.rabbitmq.endpoint", "unencrypted", "spec.rabbitmq.allowPlaintextHTTP: true"}},
		{"http with the opt-in off", func(cs *v1.CredentialSet) {
			cs.Spec.RabbitMQ.Endpoint, cs.Spec.RabbitMQ.AllowPlaintextHTTP = "http://rabbitmq.openstack.svc:15672", false
		}, []string{"spec.rabbitmq.allowPlaintextHTTP: true"}},
		{"opt-in left on an https endpoint", func(cs *v1.CredentialSet) { cs.Spec.RabbitMQ.AllowPlaintextHTTP = true },
			[]string{"spec.rabbitmq.allowPlaintextHTTP", "applies only to an http:// endpoint"}},
		{"tls on an http endpoint", func(cs *v1.CredentialSet) {
			cs.Spec.RabbitMQ.Endpoint, cs.Spec.RabbitMQ.AllowPlaintextHTTP = "http://rabbitmq.openstack.svc:15672", true
			cs.Spec.RabbitMQ.TLS = &v1.RabbitMQTLS{InsecureSkipVerify: true}
		}, []string{"spec.rabbitmq.tls", "applies only to an https:// endpoint"}},
		{"upper-case scheme", func(cs *v1.CredentialSet) { cs.Spec.RabbitMQ.Endpoint = "HTTPS://rabbitmq:15671" }, []string{"spec.rabbitmq.endpoint"}},
		{"a tag that marks ownership", func(cs *v1.CredentialSet) { cs.Spec.RabbitMQ.User.Tags = []string{"management", "rekey-owner-abc"} },
			[]string{"spec.rabbitmq.user.tags", "rekey-owner- are reserved"}},
		{"amqps with ssl off", func(cs *v1.CredentialSet) {
			cs.Spec.RabbitMQ.TransportURL = &v1.RabbitMQTransportURL{Scheme: "amqps", Hosts: []string{"rabbitmq:5671"}, Query: "ssl=0"}
		}, []string{"spec.rabbitmq.transportURL.query", "amqps means TLS"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := rabbit()
			c.mutate(cs)
			err := k8s.Create(ctxT(t), cs)
			if err == nil {
				t.Fatalf("admitted: %+v", cs.Spec.RabbitMQ)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("rejected with %q, want a message containing %q", err, w)
				}
			}
		})
	}

	verified := rabbit()
	verified.Spec.RabbitMQ.TLS = &v1.RabbitMQTLS{CASecretRef: &v1.SecretKeyRef{Name: "rabbit-ca", Key: "ca.crt"}}
	verified.Spec.RabbitMQ.TransportURL = &v1.RabbitMQTransportURL{Scheme: "amqps", Hosts: []string{"rabbitmq:5671"}, Query: "heartbeat=30"}
	unverified := rabbit()
	unverified.Spec.RabbitMQ.TLS = &v1.RabbitMQTLS{InsecureSkipVerify: true}
	plaintext := rabbit()
	plaintext.Spec.RabbitMQ.Endpoint, plaintext.Spec.RabbitMQ.AllowPlaintextHTTP = "http://rabbitmq.openstack.svc:15672", true
	oslo := rabbit()
	oslo.Spec.RabbitMQ.TransportURL = &v1.RabbitMQTransportURL{Hosts: []string{"rabbitmq:5671"}, Query: "ssl=1"}
	for _, cs := range []*v1.CredentialSet{rabbit(), verified, unverified, plaintext, oslo} {
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Errorf("well-formed spec %+v rejected: %v", cs.Spec.RabbitMQ, err)
		}
	}
}
