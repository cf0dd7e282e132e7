package plugin

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestShowCephFormats(t *testing.T) {
	ns := namespace(t)
	create(t, cephSet(ns, "csi", v1.CephInPlace, "client.csi", "mgr.a"))
	setStatus(t, ns, "csi", idle(4))
	secret(t, ns, "csi-keys", cephKeys("client.csi"))

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--entity", "client.csi"}, csiKey + "\n"},
		{[]string{"--entity", "mgr.a", "--format", "plain"}, mgrKey + "\n"},
		{[]string{"--entity", "client.csi", "--format", "keyring"}, "[client.csi]\n\tkey = " + csiKey + "\n"},
		{[]string{"--entity", "client.csi", "--format", "env"}, "CEPH_NAME=client.csi\nCEPH_ID=csi\nCEPH_KEY=" + csiKey + "\n"},
		{[]string{"--entity", "mgr.a", "--format", "env"}, "CEPH_NAME=mgr.a\nCEPH_ID=a\nCEPH_KEY=" + mgrKey + "\n"},
	} {
		// Exactly the one key asked for: never the other entity's.
		out, errOut, err := kubectl(t, ns, append([]string{"show", "csi"}, c.args...)...)
		if err != nil || out != c.want || errOut != "" {
			t.Errorf("show %v: %v, stdout %q, stderr %q; want stdout %q", c.args, err, out, errOut, c.want)
		}
	}

	create(t, hostsSet(ns, "orders"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"csi"}, `credentialset "csi" has 2 entities: choose one with --entity (client.csi, mgr.a)`},
		{[]string{"csi", "--entity", "client.csi.4"}, `credentialset "csi" has no entity "client.csi.4": use one of client.csi, mgr.a`},
		{[]string{"csi", "--user", "client.csi"}, `--user picks a MySQL user or a PostgreSQL login, but credentialset "csi" is a Ceph set: pick the entity with --entity (client.csi, mgr.a)`},
		{[]string{"csi", "--entity", "mgr.a", "--format", "mycnf"}, `unknown format "mycnf" for a Ceph set: use plain, keyring or env`},
		{[]string{"csi", "--entity", "mgr.a", "--format", "url"}, `unknown format "url" for a Ceph set: use plain, keyring or env`},
		{[]string{"orders", "--entity", "mgr.a"}, `--entity picks a Ceph entity, but credentialset "orders" is a MySQL set: pick the user with --user (orders@%)`},
		{[]string{"orders", "--format", "keyring"}, `unknown format "keyring": use plain, mycnf or env`},
	} {
		// A refusal prints nothing but the error, and no key in it.
		out, errOut, err := kubectl(t, ns, append([]string{"show"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || out != "" || errOut != "" {
			t.Errorf("show %v: error %v, stdout %q, stderr %q; want only an error containing %q", c.args, err, out, errOut, c.want)
		} else if strings.Contains(err.Error(), csiKey) || strings.Contains(err.Error(), mgrKey) {
			t.Errorf("show %v: the error holds a key: %v", c.args, err)
		}
	}

	// InPlace: the note says the old key is gone already; stdout stays the key.
	setStatus(t, ns, "csi", distributed("r-4"))
	out, errOut, err := kubectl(t, ns, "show", "csi", "--entity", "mgr.a")
	if err != nil || out != mgrKey+"\n" || errOut != "note: rotation r-4 is active; this is its new key (the old one stopped working when Ceph rotated it: InPlace)\n" {
		t.Errorf("show during an InPlace rotation: %v, stdout %q, stderr %q", err, out, errOut)
	}
}

func TestShowCephOverlappingAndMissingKeys(t *testing.T) {
	ns := namespace(t)
	cs := cephSet(ns, "csi", v1.CephOverlapping, "client.csi")
	create(t, cs)
	setStatus(t, ns, "csi", idle(3))
	mustFail(t, ns, "distribution Secret "+ns+"/csi-keys does not exist yet", "show", "csi")
	secret(t, ns, "csi-keys", map[string]string{"client.csi.key": csiKey}) // as if cut short

	// One entity: --entity is not needed.
	out, errOut, err := kubectl(t, ns, "show", "csi")
	if err != nil || out != csiKey+"\n" || errOut != "" {
		t.Errorf("show of the only entity: %v, stdout %q, stderr %q", err, out, errOut)
	}
	mustFail(t, ns, "distribution Secret "+ns+"/csi-keys has no key client.csi.keyring for entity client.csi: the operator has not distributed it yet", "show", "csi", "--format", "keyring")
	mustFail(t, ns, "has no key client.csi.name for entity client.csi", "show", "csi", "--format", "env")

	// Overlapping: the note names the new generation's entity.
	setStatus(t, ns, "csi", func(st *v1.CredentialSetStatus) { distributed("r-4")(st); st.TargetGeneration = 4 })
	_, errOut, err = kubectl(t, ns, "show", "csi")
	if want := "note: rotation r-4 is active; this is the key of its new entity client.csi.4 (the prior entity works until discard, and after it as keepPriorKeyCount 1 says)\n"; err != nil || errOut != want {
		t.Errorf("show during an Overlapping rotation: %v, stderr %q, want %q", err, errOut, want)
	}

	nodist := cephSet(ns, "nodist", v1.CephInPlace, "mgr.a")
	nodist.Spec.Distribution = nil
	create(t, nodist)
	mustFail(t, ns, `credentialset "nodist" has no distribution target (spec.distribution is empty), so no Secret outside the operator's namespace holds its keys`, "show", "nodist")
}

func TestShowRabbitMQFormats(t *testing.T) {
	ns := namespace(t)
	create(t, rabbitSet(ns, "nova"))
	setStatus(t, ns, "nova", idle(4))
	secret(t, ns, "nova-transport", rabbitKeys())

	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, novaPW + "\n"},
		{[]string{"--format", "plain"}, novaPW + "\n"},
		{[]string{"--format", "env"}, "RABBITMQ_USERNAME=nova-g4\nRABBITMQ_PASSWORD=" + novaPW + "\n"},
		{[]string{"--format", "url"}, novaURL + "\n"},
	} {
		out, errOut, err := kubectl(t, ns, append([]string{"show", "nova"}, c.args...)...)
		if err != nil || out != c.want || errOut != "" {
			t.Errorf("show %v: %v, stdout %q, stderr %q; want stdout %q", c.args, err, out, errOut, c.want)
		}
	}
	mustFail(t, ns, `unknown format "keyring" for a RabbitMQ set: use plain, env or url`, "show", "nova", "--format", "keyring")
	mustFail(t, ns, `credentialset "nova" is a RabbitMQ set with a single user (a new one per generation), so show takes no --user: drop it`, "show", "nova", "--user", "nova-g4")
	mustFail(t, ns, "so show takes no --entity: drop it", "show", "nova", "--entity", "client.csi")

	// A transport_url under another key, and none at all.
	cs := rabbitSet(ns, "keystone")
	cs.Spec.RabbitMQ.User.Base = "keystone"
	cs.Spec.RabbitMQ.TransportURL.Key = "amqp_url"
	cs.Spec.RabbitMQ.ConfigFile = nil
	create(t, cs)
	secret(t, ns, "keystone-transport", map[string]string{"username": "keystone-g1", "password": novaPW, "amqp_url": novaURL})
	if out, _, err := kubectl(t, ns, "show", "keystone", "--format", "url"); err != nil || out != novaURL+"\n" {
		t.Errorf("show --format url with transportURL.key amqp_url: %v, stdout %q", err, out)
	}
	cs = rabbitSet(ns, "glance")
	cs.Spec.RabbitMQ.User.Base = "glance"
	cs.Spec.RabbitMQ.TransportURL, cs.Spec.RabbitMQ.ConfigFile = nil, nil
	create(t, cs)
	secret(t, ns, "glance-transport", map[string]string{"username": "glance-g1", "password": novaPW})
	mustFail(t, ns, `credentialset "glance" renders no transport_url (spec.rabbitmq.transportURL is not set): use --format plain or env`, "show", "glance", "--format", "url")

	// During a rotation the Secret holds the new user (as the operator
	// distributes it); the note names it, stdout is only the password.
	sec := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "nova-transport"}, sec); err != nil {
		t.Fatal(err)
	}
	const newPW = "Qm4vTz7sWc2nLp9xKr5yHb3gFd8jAe6u"
	sec.Data["username"], sec.Data["password"] = []byte("nova-g5"), []byte(newPW)
	if err := k8s.Update(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	setStatus(t, ns, "nova", func(st *v1.CredentialSetStatus) { distributed("r-5")(st); st.TargetGeneration = 5 })
	out, errOut, err := kubectl(t, ns, "show", "nova")
	if err != nil || out != newPW+"\n" || errOut != "note: rotation r-5 is active; this is its new user nova-g5 (the old user works until discard)\n" {
		t.Errorf("show during a rotation: %v, stdout %q, stderr %q", err, out, errOut)
	}
}
