package v1alpha1

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

func TestAccessorsApplyDefaults(t *testing.T) {
	cases := []struct {
		name      string
		got, want any
	}{
		{"ceph admin unset", (&CephSpec{}).AdminEntity(), "client.admin"},
		{"ceph admin set", (&CephSpec{Admin: CephAdmin{Entity: "client.ops"}}).AdminEntity(), "client.ops"},
		{"ceph strategy unset", (&CephSpec{}).RotationStrategy(), CephInPlace},
		{"ceph strategy set", (&CephSpec{Strategy: CephOverlapping}).RotationStrategy(), CephOverlapping},
		{"ceph strategy unknown kept", (&CephSpec{Strategy: "Sideways"}).RotationStrategy(), CephStrategy("Sideways")},
		{"ceph keep unset", (&CephSpec{}).PriorKeysKept(), int32(1)},
		{"ceph keep 0 is not unset", (&CephSpec{KeepPriorKeyCount: ptr.To[int32](0)}).PriorKeysKept(), int32(0)},
		{"ceph keep 3", (&CephSpec{KeepPriorKeyCount: ptr.To[int32](3)}).PriorKeysKept(), int32(3)},
		{"mysql port unset", (&StatefulSetInstances{}).PortNumber(), int32(3306)},
		{"mysql port set", (&StatefulSetInstances{Port: 3307}).PortNumber(), int32(3307)},
		{"mysql host unset", (&MySQLUser{}).AccountHost(), "%"},
		{"mysql host set", (&MySQLUser{Host: "10.0.0.%"}).AccountHost(), "10.0.0.%"},
		{"mysql tls unset", (&MySQLSpec{}).TLSMode(), "Required"},
		{"mysql tls set", (&MySQLSpec{TLS: "Disabled"}).TLSMode(), "Disabled"},
		{"rabbit user key unset", (&RabbitMQAdmin{}).UsernameSecretKey(), "username"},
		{"rabbit user key set", (&RabbitMQAdmin{UsernameKey: "user"}).UsernameSecretKey(), "user"},
		{"rabbit password key unset", (&RabbitMQAdmin{}).PasswordSecretKey(), "password"},
		{"rabbit password key set", (&RabbitMQAdmin{PasswordKey: "pw"}).PasswordSecretKey(), "pw"},
		{"transport scheme unset", (&RabbitMQTransportURL{}).URLScheme(), "rabbit"},
		{"transport scheme set", (&RabbitMQTransportURL{Scheme: "amqps"}).URLScheme(), "amqps"},
		{"transport key unset", (&RabbitMQTransportURL{}).SecretKey(), "transport_url"},
		{"transport key set", (&RabbitMQTransportURL{Key: "url"}).SecretKey(), "url"},
		{"config section unset", (&RabbitMQConfigFile{}).SectionName(), "DEFAULT"},
		{"config section set", (&RabbitMQConfigFile{Section: "oslo_messaging"}).SectionName(), "oslo_messaging"},
		{"config option unset", (&RabbitMQConfigFile{}).OptionName(), "transport_url"},
		{"config option set", (&RabbitMQConfigFile{Option: "url"}).OptionName(), "url"},
		{"deletion policy unset", (&CredentialSetSpec{}).OnDeletion(), DeletionDiscard},
		{"deletion policy set", (&CredentialSetSpec{DeletionPolicy: DeletionRetain}).OnDeletion(), DeletionRetain},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestCRDDefaultsMatchAccessors reads the generated CRD: admission and
// the accessors must apply the same default, or a set would behave
// differently depending on whether it went through the API server.
func TestCRDDefaultsMatchAccessors(t *testing.T) {
	raw, err := os.ReadFile("../../config/crd/bases/rekey.io_credentialsets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	cases := []struct {
		path string // dotted; [] steps into a list's items
		want any    // nil: the CRD must have no default there
	}{
		{"spec.ceph.admin.entity", DefaultCephAdminEntity},
		{"spec.ceph.strategy", DefaultCephStrategy},
		// A CRD default would contradict admission, which allows
		// keepPriorKeyCount with strategy Overlapping only.
		{"spec.ceph.keepPriorKeyCount", nil},
		{"spec.mysql.instances.statefulSet.port", DefaultMySQLPort},
		{"spec.mysql.users.[].host", DefaultMySQLUserHost},
		{"spec.mysql.tls", DefaultMySQLTLS},
		{"spec.rabbitmq.admin.usernameKey", DefaultRabbitMQUsernameKey},
		{"spec.rabbitmq.admin.passwordKey", DefaultRabbitMQPasswordKey},
		{"spec.rabbitmq.transportURL.scheme", DefaultTransportURLScheme},
		{"spec.rabbitmq.transportURL.key", DefaultTransportURLKey},
		{"spec.rabbitmq.configFile.section", DefaultConfigFileSection},
		{"spec.rabbitmq.configFile.option", DefaultConfigFileOption},
		{"spec.deletionPolicy", DefaultDeletionPolicy},
	}
	for _, c := range cases {
		s := root
		for _, step := range strings.Split(c.path, ".") {
			if step == "[]" {
				s = s.Items.Schema
				continue
			}
			p, ok := s.Properties[step]
			if !ok {
				t.Fatalf("%s: the CRD has no %s", c.path, step)
			}
			s = &p
		}
		switch {
		case c.want == nil && s.Default != nil:
			t.Errorf("%s: the CRD defaults it to %s, want no default", c.path, s.Default.Raw)
		case c.want == nil:
		case s.Default == nil:
			t.Errorf("%s: the CRD has no default, want %v", c.path, c.want)
		default:
			want, _ := json.Marshal(c.want)
			if string(s.Default.Raw) != string(want) {
				t.Errorf("%s: the CRD defaults it to %s, the accessor to %s", c.path, s.Default.Raw, want)
			}
		}
	}
}
