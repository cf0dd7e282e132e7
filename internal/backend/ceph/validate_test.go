package ceph

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func capsOf(mon string) v1.CephCaps { return v1.CephCaps{Mon: mon} }

// hostile are values a tenant could put in a spec to reach the CLI as an
// option, a second ceph.conf line, or a file of the manager's.
var hostile = []string{
	"-i/etc/passwd", "--in-file=/etc/passwd", "-o/tmp/x", "--keyring=/etc/ceph/ceph.client.admin.keyring",
	"--admin-daemon=/run/ceph/x.asok", "-c/etc/passwd", "allow r\n[global]", "allow r\nkeyring = /etc/shadow",
	"allow r\x00", " -i/etc/passwd", "allow r, -i/etc/passwd", "allow r -i/etc/passwd", "allow\tr",
	"allow r\r", "allow command \"x\n\"", "--", "-", "allow r\u00a0", "profile", "allow", "",
}

func TestValidateCaps(t *testing.T) {
	for _, ok := range []string{
		"allow r", "allow *", "allow rw pool=x namespace=y", "profile rbd pool=rbd", "allow profile rbd",
		`allow command "config get"`, "allow service mgr r", "allow r, allow command 'auth get'",
		"allow class-read object_prefix rbd_children, allow rwx pool=rbd", "allow rw path=/volumes fsname=a",
		`allow command "osd blocklist" with blocklistop=add`, "allow r network 10.0.0.0/8; allow w",
		"profile crash", "allow rwx tag cephfs data=a", `allow command "config-key get" with key prefix rekey/`,
	} {
		if err := ValidateCaps("caps.mon", ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range hostile {
		if bad == "" {
			continue // no caps for that daemon
		}
		err := ValidateCaps("caps.mon", bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if !strings.Contains(err.Error(), "caps.mon") {
			t.Errorf("%q: the error %q does not name the field", bad, err)
		}
		if strings.ContainsAny(err.Error(), "\n\r\x00") || strings.Contains(err.Error(), "passwd") {
			t.Errorf("%q: the error quotes the value: %q", bad, err)
		}
	}
}

func TestValidateConfig(t *testing.T) {
	for k, v := range map[string]string{
		"ms_mon_client_mode": "secure", "ms_client_mode": "secure crc", "auth_client_required": "cephx",
		"rados_mon_op_timeout": "30", "mon_client_hunt_interval": "2.5", "ms_bind_ipv6": "true",
		"mon_client_hunt_parallel": "3",
	} {
		if err := ValidateConfig(k, v); err != nil {
			t.Errorf("%s = %s refused: %v", k, v, err)
		}
	}
	for k, v := range map[string]string{
		"log_file": "/tmp/x", "admin_socket": "/tmp/x.asok", "keyring": "/etc/passwd", "mon_host": "1.2.3.4",
		"plugin_dir": "/tmp", "log file": "/tmp/x", "debug_ms": "20", "ms_mon_client_mode": "secure\n[global]",
		"rados_mon_op_timeout": "-1", "ms_bind_ipv6": "yes", "auth_client_required": "cephx\nkeyring = /x",
		"x\n[global]\nlog_file": "/tmp/x", "-i/etc/passwd": "x",
	} {
		err := ValidateConfig(k, v)
		if err == nil {
			t.Errorf("%q = %q accepted", k, v)
			continue
		}
		if !strings.Contains(err.Error(), "spec.ceph.config") || strings.ContainsAny(err.Error(), "\n\r") {
			t.Errorf("%q: error %q does not name the field or carries a line break", k, err)
		}
	}
}

// TestCRDCarriesTheBackendsGrammar: admission and the backend must agree,
// or a spec the API server accepts would be refused later (or the other
// way round). The caps rule and the config allow-list are compared with
// the generated CRD.
func TestCRDCarriesTheBackendsGrammar(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "crd", "bases", "rekey.io_credentialsets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	ceph := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["ceph"]
	caps := ceph.Properties["entities"].Items.Schema.Properties["caps"]
	for _, d := range []string{"mon", "osd", "mgr", "mds"} {
		rules := caps.Properties[d].XValidations
		if len(rules) != 1 {
			t.Fatalf("caps.%s: %d rules, want 1", d, len(rules))
		}
		re, ok := strings.CutPrefix(rules[0].Rule, "self.matches('")
		re, ok2 := strings.CutSuffix(re, "')")
		if !ok || !ok2 {
			t.Fatalf("caps.%s: rule %q is not self.matches('...')", d, rules[0].Rule)
		}
		if re = strings.ReplaceAll(re, `\x27`, "'"); re != CapPattern {
			t.Errorf("caps.%s: the CRD's grammar\n%s\ndiffers from the backend's\n%s", d, re, CapPattern)
		}
		if !strings.Contains(rules[0].Message, "caps."+d) {
			t.Errorf("caps.%s: message %q does not name the field", d, rules[0].Message)
		}
	}
	var allow string
	for _, r := range ceph.Properties["config"].XValidations {
		// The allow-list is the rule that is nothing but a membership
		// test; the per-option value rules also start with "k in [".
		if strings.HasPrefix(r.Rule, "self.all(k, k in [") && !strings.Contains(r.Rule, "||") {
			allow = r.Rule
		}
	}
	list := regexp.MustCompile(`'([a-z0-9_]+)'`).FindAllStringSubmatch(allow, -1)
	var names []string
	for _, m := range list {
		names = append(names, m[1])
	}
	if got, want := sortedJoin(names), strings.Join(ConfigOptionNames(), ","); got != want {
		t.Errorf("the CRD's config allow-list %s differs from the backend's %s", got, want)
	}
}

func sortedJoin(s []string) string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return strings.Join(c, ",")
}

// safeArg is what any validator's accepted value must be, whatever the
// input: never an option of the CLI, never a second line.
func safeArg(t *testing.T, what, v string) {
	t.Helper()
	if strings.HasPrefix(strings.TrimSpace(v), "-") || strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		t.Fatalf("%s accepted %q", what, v)
	}
}

// FuzzValidateCaps: an accepted cap string is a safe argument and reaches
// the CLI as it was given (the conf and argv carry it unchanged), and
// checkArgs agrees with the validator.
func FuzzValidateCaps(f *testing.F) {
	for _, s := range append(hostile, "allow r", `allow command "config get"`, "profile rbd pool=rbd, allow r") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, caps string) {
		if ValidateCaps("caps.mon", caps) != nil || caps == "" {
			return
		}
		safeArg(t, "ValidateCaps", caps)
		words := capArgs(capsOf(caps))
		if len(words) != 2 || words[1] != caps {
			t.Fatalf("caps %q became arguments %q", caps, words)
		}
		if err := checkArgs(words); err != nil {
			t.Fatalf("the validator accepted %q, the exec check refused it: %v", caps, err)
		}
	})
}

// FuzzValidateConfig: an accepted option renders to exactly one
// "name = value" line of ceph.conf that reads back as the same pair.
func FuzzValidateConfig(f *testing.F) {
	for _, s := range hostile {
		f.Add("log_file", s)
		f.Add(s, "secure")
	}
	f.Add("ms_mon_client_mode", "secure")
	f.Add("rados_mon_op_timeout", "30")
	f.Add("admin_socket", "/tmp/x")
	f.Add("ms_client_mode", "secure\n[client]\nkeyring = /etc/passwd")
	f.Fuzz(func(t *testing.T, name, value string) {
		conf, err := buildConf([]string{"v2:10.0.0.1:3300"}, map[string]string{name: value})
		if err != nil {
			return
		}
		safeArg(t, "ValidateConfig (name)", name)
		safeArg(t, "ValidateConfig (value)", value)
		want := "[global]\n" + name + " = " + value + "\nmon_host = v2:10.0.0.1:3300\n"
		if conf != want {
			t.Fatalf("conf %q, want %q", conf, want)
		}
		if _, ok := ConfigOptions[name]; !ok {
			t.Fatalf("%q is not on the allow-list", name)
		}
	})
}

// FuzzEntityName: an accepted entity name is a safe argument, a valid
// keyring section, and its generations are told apart from it.
func FuzzEntityName(f *testing.F) {
	for _, s := range append(hostile, "client.csi", "client.-i", "client..x", "mgr.a", "client.x\n[client.admin]", "client.a.3") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if !validEntity(name) {
			return
		}
		safeArg(t, "validEntity", name)
		if strings.ContainsAny(name, "[]= ") || strings.HasPrefix(entityID(name), "-") {
			t.Fatalf("validEntity accepted %q", name)
		}
		if err := checkArgs([]string{"auth", "get", name}); err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		kr := Keyring{Entity: name, Key: "AQBm0hlnAAAAABAAq3cM3eQ5w2T9u2JpH7uSbw=="}
		if back, err := ParseKeyring(kr.String()); err != nil || back != kr {
			t.Fatalf("%q does not round-trip through a keyring: %+v, %v", name, back, err)
		}
		if g, ok := generationOf(name, GenerationEntity(name, 7)); !ok || g != 7 {
			t.Fatalf("%q: generation 7 reads back as %d, %v", name, g, ok)
		}
	})
}
