package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestAdmissionCephHostileValues: the real API server refuses every spec
// value that could reach the ceph CLI as an option, a second ceph.conf
// line, or an option that writes files or loads code, with a message that
// names the field and says what to write instead; a spec cannot name a
// program at all (cliPath is gone, dropped as an unknown field).
func TestAdmissionCephHostileValues(t *testing.T) {
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
	capsMsg := "must be cap clauses such as"
	cases := []struct {
		name   string
		mutate func(*v1.CredentialSet)
		want   []string
	}{
		{"cap reading a file", func(cs *v1.CredentialSet) { cs.Spec.Ceph.Entities[0].Caps.Mon = "-i/etc/passwd" },
			[]string{"spec.ceph.entities[0].caps.mon", capsMsg, "never a leading -"}},
		{"cap naming a keyring", func(cs *v1.CredentialSet) {
			cs.Spec.Ceph.Entities[0].Caps.OSD = "--keyring=/etc/ceph/ceph.client.admin.keyring"
		}, []string{"spec.ceph.entities[0].caps.osd", capsMsg}},
		{"cap with a newline", func(cs *v1.CredentialSet) { cs.Spec.Ceph.Entities[0].Caps.Mon = "allow r\n[global]" },
			[]string{"spec.ceph.entities[0].caps.mon", capsMsg}},
		{"option in a second clause", func(cs *v1.CredentialSet) { cs.Spec.Ceph.Entities[0].Caps.MGR = "allow r, -o/tmp/x" },
			[]string{"spec.ceph.entities[0].caps.mgr", capsMsg}},
		{"cap that is not a clause", func(cs *v1.CredentialSet) { cs.Spec.Ceph.Entities[0].Caps.MDS = "rw" },
			[]string{"spec.ceph.entities[0].caps.mds", capsMsg}},
		{"log_file", func(cs *v1.CredentialSet) { cs.Spec.Ceph.Config = map[string]v1.CephConfigValue{"log_file": "/tmp/x"} },
			[]string{"spec.ceph.config", "only client connection options may be set", "remove any other key"}},
		{"admin_socket", func(cs *v1.CredentialSet) {
			cs.Spec.Ceph.Config = map[string]v1.CephConfigValue{"admin_socket": "/tmp/x.asok"}
		},
			[]string{"spec.ceph.config", "only client connection options may be set"}},
		{"keyring", func(cs *v1.CredentialSet) {
			cs.Spec.Ceph.Config = map[string]v1.CephConfigValue{"keyring": "/etc/passwd"}
		},
			[]string{"spec.ceph.config", "only client connection options may be set"}},
		// Values are short words and numbers (checked again per option by
		// the backend before any command runs, TestHostileSpecValuesRunNothing).
		{"config value as an option", func(cs *v1.CredentialSet) {
			cs.Spec.Ceph.Config = map[string]v1.CephConfigValue{"ms_mon_client_mode": "-i/etc/passwd"}
		}, []string{"spec.ceph.config.ms_mon_client_mode", "should match"}},
		{"config value with a newline", func(cs *v1.CredentialSet) {
			cs.Spec.Ceph.Config = map[string]v1.CephConfigValue{"rados_mon_op_timeout": "30\n[global]"}
		}, []string{"spec.ceph.config.rados_mon_op_timeout", "should match"}},
		{"config mode that is not one", func(cs *v1.CredentialSet) {
			cs.Spec.Ceph.Config = map[string]v1.CephConfigValue{"ms_client_mode": "plain"}
		}, []string{"spec.ceph.config", "take secure, crc, or both"}},
		{"config timeout that is not a number", func(cs *v1.CredentialSet) {
			cs.Spec.Ceph.Config = map[string]v1.CephConfigValue{"rados_osd_op_timeout": "forever"}
		}, []string{"spec.ceph.config", "plain numbers"}},
		{"entity name as an option", func(cs *v1.CredentialSet) { cs.Spec.Ceph.Entities[0].Name = "client.-i" },
			[]string{"spec.ceph.entities[0].name"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := ceph()
			c.mutate(cs)
			err := k8s.Create(ctxT(t), cs)
			if err == nil {
				t.Fatalf("admitted: %+v", cs.Spec.Ceph)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("rejected with %q, want a message containing %q", err, w)
				}
			}
		})
	}

	// cliPath is no field any more: the API server prunes it, so a spec
	// that still carries it names no program.
	raw := ceph()
	raw.Name = "with-cli-path"
	body, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatal(err)
	}
	obj["apiVersion"], obj["kind"] = v1.GroupVersion.String(), "CredentialSet"
	obj["spec"].(map[string]any)["ceph"].(map[string]any)["cliPath"] = "/tmp/tenant-script"
	u := &unstructured.Unstructured{Object: obj}
	if err := k8s.Create(ctxT(t), u); err != nil {
		t.Fatalf("create with cliPath: %v", err)
	}
	stored := &unstructured.Unstructured{Object: map[string]any{"apiVersion": v1.GroupVersion.String(), "kind": "CredentialSet"}}
	if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: raw.Name}, stored); err != nil {
		t.Fatal(err)
	}
	got := stored.Object["spec"].(map[string]any)["ceph"].(map[string]any)
	if _, ok := got["cliPath"]; ok {
		t.Fatal("spec.ceph.cliPath was stored: a spec can still name a program")
	}

	good := ceph()
	good.Spec.Ceph.Entities = []v1.CephEntity{{Name: "client.full", Caps: v1.CephCaps{
		Mon: `allow r, allow command "config get", allow service mgr r`,
		OSD: "allow rw pool=x namespace=y, profile rbd pool=rbd",
		MGR: "profile rbd pool=rbd",
		MDS: "allow rw path=/volumes fsname=a",
	}}}
	good.Spec.Ceph.Config = map[string]v1.CephConfigValue{"ms_mon_client_mode": "secure", "ms_client_mode": "secure crc",
		"auth_client_required": "cephx", "rados_mon_op_timeout": "30", "mon_client_hunt_interval": "2.5", "ms_bind_ipv6": "false"}
	if err := k8s.Create(ctxT(t), good); err != nil {
		t.Fatalf("well-formed caps and config rejected: %v", err)
	}
}
