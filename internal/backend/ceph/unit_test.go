package ceph

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

const testKey = "AgBJqANrJEEbJyAA7gn58ZdrXynfXjrKhqDKlit8W+xUbq6Fjld3dMhMR18="

func TestKeyringRoundTrip(t *testing.T) {
	kr := Keyring{Entity: "client.csi.3", Key: testKey}
	got, err := ParseKeyring(kr.String())
	if err != nil || got != kr {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	// What ceph-authtool and `ceph auth get` write: caps lines, tabs.
	text := "[client.admin]\n\tkey = " + testKey + "\n\tcaps mds = \"allow *\"\n\tcaps mon = \"allow *\"\n"
	if got, err := ParseKeyring(text); err != nil || got.Entity != "client.admin" || got.Key != testKey {
		t.Fatalf("authtool keyring: %+v, %v", got, err)
	}
	two := kr.String() + Keyring{Entity: "client.admin", Key: testKey}.String()
	if _, err := ParseKeyring(two); err == nil {
		t.Fatal("two sections accepted as one keyring")
	}
	if got, err := parseKeyringFor(two, "client.admin"); err != nil || got.Entity != "client.admin" {
		t.Fatalf("parseKeyringFor: %+v, %v", got, err)
	}
	withMon := "[mon.]\n\tkey = " + testKey + "\n" + Keyring{Entity: "client.admin", Key: testKey}.String()
	if got, err := ParseKeyring(withMon); err != nil || got.Entity != "client.admin" {
		t.Fatalf("a keyring with a mon. section: %+v, %v", got, err)
	}
	for _, bad := range []string{
		"", "key = " + testKey, "[client.x]\n", "[client.x]\n\tkey = not base64!\n",
		"[bogus]\n\tkey = " + testKey + "\n", // no section rekey reads
	} {
		_, err := ParseKeyring(bad)
		if err == nil {
			t.Errorf("accepted %q", bad)
			continue
		}
		if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), "not base64!") {
			t.Errorf("error quotes key material: %v", err)
		}
	}
}

func TestGenerationNames(t *testing.T) {
	for _, tc := range []struct {
		base, entity string
		gen          int64
		ok           bool
	}{
		{"client.csi", "client.csi", 0, true},
		{"client.csi", "client.csi.3", 3, true},
		{"client.csi", "client.csi.12", 12, true},
		{"client.csi", "client.csi.03", 0, false},
		{"client.csi", "client.csi.0", 0, false},
		{"client.csi", "client.csi.rbd", 0, false},
		{"client.csi", "client.csi.rbd.3", 0, false},
		{"client.csi", "client.csi-rbd.3", 0, false},
		{"client.csi", "client.csix", 0, false},
	} {
		gen, ok := generationOf(tc.base, tc.entity)
		if gen != tc.gen || ok != tc.ok {
			t.Errorf("generationOf(%s, %s) = %d, %v", tc.base, tc.entity, gen, ok)
		}
	}
	if generationEntity("client.csi", 0) != "client.csi" || generationEntity("client.csi", 4) != "client.csi.4" {
		t.Fatal("generationEntity")
	}
	if entityID("client.csi.3") != "csi.3" || entityID("mgr.a") != "a" {
		t.Fatal("entityID")
	}
}

func TestRender(t *testing.T) {
	b, err := New(&v1.CephSpec{Monitors: []string{"10.0.0.1:6789"}, Strategy: v1.CephOverlapping,
		Entities: []v1.CephEntity{{Name: "client.csi"}}}, fileStore{}, "")
	if err != nil {
		t.Fatal(err)
	}
	kr := Keyring{Entity: "client.csi.3", Key: testKey}
	out, err := b.Render(engine.Secrets{"client.csi": kr.String()})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"client.csi.keyring": kr.String(), "client.csi.key": testKey,
		"client.csi.name": "client.csi.3", "client.csi.id": "csi.3",
	}
	if len(out) != len(want) {
		t.Fatalf("Render keys: %d, want %d", len(out), len(want))
	}
	for k, v := range want {
		if string(out[k]) != v {
			t.Errorf("%s: wrong value", k)
		}
	}
	if _, err := b.NewSecrets(1); err == nil {
		t.Fatal("NewSecrets succeeded for a ReadBack backend")
	}
}

func TestNewRefusesConfusingSpecs(t *testing.T) {
	ents := func(names ...string) []v1.CephEntity {
		var out []v1.CephEntity
		for _, n := range names {
			out = append(out, v1.CephEntity{Name: n})
		}
		return out
	}
	mon := []string{"v2:10.0.0.1:3300"}
	for name, spec := range map[string]v1.CephSpec{
		"generation clash":   {Monitors: mon, Strategy: v1.CephOverlapping, Entities: ents("client.csi", "client.csi.2")},
		"overlapping daemon": {Monitors: mon, Strategy: v1.CephOverlapping, Entities: ents("mgr.a")},
		"overlapping admin":  {Monitors: mon, Strategy: v1.CephOverlapping, Entities: ents("client.admin")},
		"rotator":            {Monitors: mon, Entities: ents(RotatorEntity)},
		"duplicate":          {Monitors: mon, Entities: ents("client.a", "client.a")},
		"no monitors":        {Entities: ents("client.a")},
		"bad monitor":        {Monitors: []string{"a b"}, Entities: ents("client.a")},
		"mon_host in config": {Monitors: mon, Config: map[string]v1.CephConfigValue{"mon host": "x"}, Entities: ents("client.a")},
		"section in config":  {Monitors: mon, Config: map[string]v1.CephConfigValue{"x": "]\n[client.a"}, Entities: ents("client.a")},
		"no entities":        {Monitors: mon},
		"unknown strategy":   {Monitors: mon, Strategy: "Sideways", Entities: ents("client.a")},
		"admin not a client": {Monitors: mon, Admin: v1.CephAdmin{Entity: "mgr.a"}, Entities: ents("client.a")},
	} {
		if _, err := New(&spec, fileStore{}, ""); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	b, err := New(&v1.CephSpec{Monitors: mon, Config: map[string]v1.CephConfigValue{"ms_mon_client_mode": "secure"}, Entities: ents("client.csi", "client.csi.2")}, fileStore{}, "")
	if err != nil {
		t.Fatalf("in place, client.csi.2 is just another entity: %v", err)
	}
	if !strings.Contains(b.conf, "ms_mon_client_mode = secure\n") || !strings.Contains(b.conf, "mon_host = v2:10.0.0.1:3300\n") {
		t.Fatalf("conf does not carry the spec: %q", b.conf)
	}
}

func TestSanitizeAndClassify(t *testing.T) {
	stderr := "2026-11-23T02:42:58.861+0000 7fc4 -1 auth: error parsing file /x/k: val=" + testKey + ": Malformed input\n" +
		"Error EINVAL: something " + testKey + " odd\n"
	got := sanitize(stderr)
	if strings.Contains(got, testKey) || strings.Contains(got, "error parsing") || !strings.Contains(got, "Error EINVAL: something [redacted] odd") {
		t.Fatalf("sanitize = %q", got)
	}
	for _, tc := range []struct {
		code   int
		stderr string
		want   error
	}{
		{13, "[errno 13] RADOS permission denied (error connecting to the cluster)", ErrAuthFailed},
		{13, "Error EACCES: access denied", ErrDenied},
		{2, "Error ENOENT: failed to find client.x in keyring", ErrNotFound},
		{1, "timed out", errTimedOut},
		{1, stderr + "timed out", ErrAuthFailed},
		{22, "Error EINVAL: bad", nil},
	} {
		if got := classify(tc.code, tc.stderr); got != tc.want {
			t.Errorf("classify(%d, %q) = %v, want %v", tc.code, tc.stderr, got, tc.want)
		}
	}
	if got := commandName([]string{"auth", "get-or-create", "client.x", "mon", "allow r", "--format", "json"}); got != "auth get-or-create client.x" {
		t.Fatalf("commandName = %q", got)
	}
}
