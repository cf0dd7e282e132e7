package plugin

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Fixtures for Ceph and RabbitMQ sets, shaped as admission accepts them.

// cephSet rotates entities with strategy, distributing to ns/<name>-keys
// and restarting DaemonSet csi-rbdplugin.
func cephSet(ns, name string, strategy v1.CephStrategy, entities ...string) *v1.CredentialSet {
	var es []v1.CephEntity
	for _, e := range entities {
		es = append(es, v1.CephEntity{Name: e, Caps: v1.CephCaps{Mon: "profile rbd", OSD: "profile rbd pool=rbd"}})
	}
	return &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.CredentialSetSpec{
			Ceph: &v1.CephSpec{
				Monitors: []string{"v2:10.0.0.1:3300", "10.0.0.2:6789"},
				Admin:    v1.CephAdmin{KeyringSecretRef: v1.SecretKeyRef{Name: "ceph-admin", Key: "keyring"}},
				Strategy: strategy,
				Entities: es,
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-keys"}},
			Consumers:    []v1.ConsumerRef{{Kind: v1.KindDaemonSet, Name: "csi-rbdplugin"}},
		},
	}
}

// rabbitSet rotates user nova with a transport_url and a config file,
// distributing to ns/<name>-transport.
func rabbitSet(ns, name string) *v1.CredentialSet {
	return &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.CredentialSetSpec{
			RabbitMQ: &v1.RabbitMQSpec{
				Endpoint: "https://rabbitmq.openstack.svc:15671",
				Admin:    v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "rabbit-admin"}},
				User: v1.RabbitMQUser{Base: "nova", Tags: []string{"monitoring"},
					Permissions:      []v1.RabbitMQPermission{{Vhost: "/", Configure: "", Write: "^nova\\.", Read: ".*"}},
					TopicPermissions: []v1.RabbitMQTopicPermission{{Vhost: "/", Exchange: "amq.topic", Write: "^nova\\.", Read: ".*"}}},
				TransportURL: &v1.RabbitMQTransportURL{Hosts: []string{"rabbitmq.openstack.svc:5672"}},
				ConfigFile:   &v1.RabbitMQConfigFile{Key: "01-nova.conf"},
			},
			Distribution:   []v1.SecretTarget{{Namespace: ns, Name: name + "-transport"}},
			Consumers:      []v1.ConsumerRef{{Kind: v1.KindStatefulSet, Name: "nova-api"}},
			ConsumerGroups: []v1.ConsumerGroup{{Name: "edpm-compute", Members: []string{"compute-0", "compute-1", "compute-2"}}},
		},
	}
}

func secret(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	b := map[string][]byte{}
	for k, v := range data {
		b[k] = []byte(v)
	}
	if err := k8s.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: b}); err != nil {
		t.Fatal(err)
	}
}

// Key material the tests distribute; show must print exactly the one asked.
const (
	csiKey  = "AQBvbWNrY3NpMDAwMDAwMDAwMDAwMDAwMDAwMDAwMA=="
	mgrKey  = "AQBvbWNrbWdyMDAwMDAwMDAwMDAwMDAwMDAwMDAwMA=="
	novaPW  = "Zx8kq2Lw0pRt5vYb7nMc3dHf6gJs9aQe"
	novaURL = "rabbit://nova-g4:" + novaPW + "@rabbitmq.openstack.svc:5672/"
)

// cephKeys is what the Ceph backend renders for client.csi and mgr.a;
// csiEntity is client.csi's current generation (client.csi itself under
// InPlace, client.csi.<N> under Overlapping).
func cephKeys(csiEntity string) map[string]string {
	return map[string]string{
		"client.csi.keyring": "[" + csiEntity + "]\n\tkey = " + csiKey + "\n",
		"client.csi.key":     csiKey,
		"client.csi.name":    csiEntity,
		"client.csi.id":      strings.TrimPrefix(csiEntity, "client."),
		"mgr.a.keyring":      "[mgr.a]\n\tkey = " + mgrKey + "\n",
		"mgr.a.key":          mgrKey,
		"mgr.a.name":         "mgr.a",
		"mgr.a.id":           "a",
	}
}

// rabbitKeys is what the RabbitMQ backend renders for nova-g4.
func rabbitKeys() map[string]string {
	return map[string]string{
		"username":      "nova-g4",
		"password":      novaPW,
		"transport_url": novaURL,
		"01-nova.conf":  "[DEFAULT]\ntransport_url = " + novaURL + "\n",
	}
}
