package cli

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// remember adds distributed material to what the leak check looks for.
func remember(vals ...string) {
	secretsMu.Lock()
	defer secretsMu.Unlock()
	for _, v := range vals {
		secrets[v] = true
	}
}

func createSecret(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	b := map[string][]byte{}
	for k, v := range data {
		b[k] = []byte(v)
	}
	if err := k8s.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: b}); err != nil {
		t.Fatal(err)
	}
}

func TestShowCephSet(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	kc := in(t, ns)
	if err := k8s.Create(context.Background(), &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "csi"},
		Spec: v1.CredentialSetSpec{
			Ceph: &v1.CephSpec{
				Monitors: []string{"10.0.0.1:6789"},
				Admin:    v1.CephAdmin{KeyringSecretRef: v1.SecretKeyRef{Name: "ceph-admin", Key: "keyring"}},
				Strategy: v1.CephOverlapping,
				Entities: []v1.CephEntity{{Name: "client.csi"}, {Name: "client.rgw"}},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: "csi-keys"}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	csi, rgw := "AQ"+password()+"==", "AQ"+password()+"=="
	remember(csi, rgw)
	createSecret(t, ns, "csi-keys", map[string]string{
		"client.csi.keyring": "[client.csi.2]\n\tkey = " + csi + "\n", "client.csi.key": csi, "client.csi.name": "client.csi.2", "client.csi.id": "csi.2",
		"client.rgw.keyring": "[client.rgw.2]\n\tkey = " + rgw + "\n", "client.rgw.key": rgw, "client.rgw.name": "client.rgw.2", "client.rgw.id": "rgw.2",
	})
	status(t, ns, "csi", idleAt(2))

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--entity", "client.csi"}, csi + "\n"},
		{[]string{"--entity", "client.rgw", "--format", "keyring"}, "[client.rgw.2]\n\tkey = " + rgw + "\n"},
		{[]string{"--entity", "client.csi", "--format", "env"}, "CEPH_NAME=client.csi.2\nCEPH_ID=csi.2\nCEPH_KEY=" + csi + "\n"},
	} {
		r := kc.ok(t, append([]string{"show", "csi"}, c.args...)...)
		if r.stdout != c.want || r.stderr != "" {
			t.Errorf("show %v: stdout %q, stderr %q; want stdout %q", c.args, r.stdout, r.stderr, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "csi"}, `credentialset "csi" has 2 entities: choose one with --entity (client.csi, client.rgw)`},
		{[]string{"show", "csi", "--entity", "client.csi", "--format", "mycnf"}, `unknown format "mycnf" for a Ceph set: use plain, keyring or env`},
	} {
		if r := kc.fails(t, c.want, c.args...); r.stdout != "" {
			t.Errorf("a failed show printed on stdout: %q", r.stdout)
		}
	}

	// Everything else reads the set without printing a key (checkNoLeak).
	r := kc.ok(t, "rotate", "csi", "--dry-run")
	contains(t, "rotate --dry-run", r.stdout, "new entity client.csi.3", "new entity client.rgw.3")
	kc.ok(t, "status", "csi")
}

func TestShowRabbitMQSet(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	kc := in(t, ns)
	if err := k8s.Create(context.Background(), &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nova"},
		Spec: v1.CredentialSetSpec{
			RabbitMQ: &v1.RabbitMQSpec{
				Endpoint:     "https://rabbitmq:15671",
				Admin:        v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "rabbit-admin"}},
				User:         v1.RabbitMQUser{Base: "nova"},
				TransportURL: &v1.RabbitMQTransportURL{Hosts: []string{"rabbitmq:5672"}},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: "nova-transport"}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	pw := password()
	url := "rabbit://nova-g3:" + pw + "@rabbitmq:5672/"
	createSecret(t, ns, "nova-transport", map[string]string{"username": "nova-g3", "password": pw, "transport_url": url})
	status(t, ns, "nova", distributedAt(2, "r-3"))

	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, pw + "\n"},
		{[]string{"--format", "env"}, "RABBITMQ_USERNAME=nova-g3\nRABBITMQ_PASSWORD=" + pw + "\n"},
		{[]string{"--format", "url"}, url + "\n"},
	} {
		// During the rotation the note goes to stderr; stdout stays clean.
		r := kc.ok(t, append([]string{"show", "nova"}, c.args...)...)
		if r.stdout != c.want || r.stderr != "note: rotation r-3 is active; this is its new user nova-g3 (the old user works until discard)\n" {
			t.Errorf("show %v: stdout %q, stderr %q; want stdout %q", c.args, r.stdout, r.stderr, c.want)
		}
	}
	if r := kc.fails(t, `credentialset "nova" is a RabbitMQ set with a single user`, "show", "nova", "--user", "nova"); r.stdout != "" {
		t.Errorf("a failed show printed on stdout: %q", r.stdout)
	}
	kc.ok(t, "status", "nova")
	kc.ok(t, "discard", "nova")
}
