package ceph

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

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
	if GenerationEntity("client.csi", 0) != "client.csi" || GenerationEntity("client.csi", 4) != "client.csi.4" {
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
		"negative keep":      {Monitors: mon, Strategy: v1.CephOverlapping, KeepPriorKeyCount: ptr.To[int32](-1), Entities: ents("client.a")},
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

const canary = "CANARY-9e1c-internal-only"

func TestSanitizeAndClassify(t *testing.T) {
	stderr := "2026-11-23T02:42:58.861+0000 7fc4 -1 auth: error parsing file /x/k: val=" + testKey + ": Malformed input\n" +
		"Error EINVAL: something " + testKey + " odd\n"
	// Only Ceph's error names and numbers survive: the monitor's words
	// (or whatever answers at the address the spec names) never do.
	for in, want := range map[string]string{
		stderr: "EINVAL",
		"[errno 13] RADOS permission denied (error connecting to the cluster)":     "errno 13",
		"Error EACCES: access denied " + canary:                                    "EACCES",
		"Error EINVAL: a\nError EINVAL: b\nError ENOENT: c":                        "EINVAL, ENOENT",
		canary + "\n[errno 110] RADOS timed out (error connecting to the cluster)": "errno 110",
		"Error " + canary: "",
	} {
		if got := sanitize(in); got != want || strings.Contains(got, testKey) {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
	// The CLI's log of a key the monitors refuse while it hunts, then the
	// timeout it ends with (as seen with an admin key another set rotated).
	badMethod := "2026-11-27T21:02:03.141+0000 7f2a -1 monclient(hunting): handle_auth_bad_method server allowed_methods [2] but i only support [2]\n"
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
		{1, badMethod + badMethod + "[errno 110] RADOS timed out (error connecting to the cluster)", ErrAuthFailed},
		{110, badMethod + "timed out", ErrAuthFailed},
		{1, "[errno 110] RADOS timed out (error connecting to the cluster)", errTimedOut},
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

// InPlace needs `ceph auth rotate`: the mon's version decides, and the
// refusal names the running version, the minimum and the alternative.
func TestInPlaceRefusal(t *testing.T) {
	for _, tc := range []struct {
		version string
		ok      bool
		shown   string // how the refusal names the running version
	}{
		{"20.2.4", true, ""},
		{"19.2.3", true, ""},
		{"19.2.3-678-ge911bdeb", true, ""},
		{"19.10.0", true, ""},
		{"21.0.0", true, ""},
		{"19.2.2", false, "Ceph 19.2.2"},
		{"18.2.7", false, "Ceph 18.2.7"},
		{"19.2", false, `"19.2"`},
		{"", false, `("")`},
		{"tentacle", false, `"tentacle"`},
	} {
		err := inPlaceRefusal(tc.version)
		if tc.ok {
			if err != nil {
				t.Errorf("%q: refused: %v", tc.version, err)
			}
			continue
		}
		rf, ok := engine.AsRefusal(err)
		if !ok || rf.Reason != "InPlaceUnsupported" {
			t.Errorf("%q: got %v, want an InPlaceUnsupported refusal", tc.version, err)
			continue
		}
		for _, want := range []string{tc.shown, MinRotateVersion, "strategy: Overlapping", "nothing was rotated"} {
			if !strings.Contains(rf.Message, want) {
				t.Errorf("%q: refusal %q does not say %q", tc.version, rf.Message, want)
			}
		}
	}
}

// Which prior generations go, for keepPriorKeyCount keep below generation
// gen (the bare name is generation 0).
func TestPriorsToRetire(t *testing.T) {
	for _, tc := range []struct {
		gens []int64
		gen  int64
		keep int
		want []int64
	}{
		{[]int64{3, 2, 1}, 3, 2, nil},
		{[]int64{3, 2, 1}, 3, 1, []int64{1}},
		{[]int64{3, 2, 1}, 3, 0, []int64{2, 1}},
		{[]int64{4, 3, 2, 1, 0}, 3, 1, []int64{1, 0}}, // 4 is newer (pending): never picked
		{[]int64{5}, 5, 0, nil},
		{nil, 1, 0, nil},
	} {
		if got := priorsToRetire(tc.gens, tc.gen, tc.keep); !slices.Equal(got, tc.want) {
			t.Errorf("gens %v below %d keep %d: got %v, want %v", tc.gens, tc.gen, tc.keep, got, tc.want)
		}
	}
}

// A lowered keepPriorKeyCount is applied while the set is idle, never in
// the middle of a rotation.
func TestTrimDue(t *testing.T) {
	n := func(v int32) *int32 { return &v }
	idle := func(prior *int32) v1.CredentialSetStatus {
		return v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3, PriorKeyCount: prior}
	}
	// with is a status of one prior, changed by f.
	with := func(f func(*v1.CredentialSetStatus)) v1.CredentialSetStatus {
		s := idle(n(1))
		f(&s)
		return s
	}
	keep := func(k int32) *Backend {
		b, err := New(&v1.CephSpec{Monitors: []string{"v2:10.0.0.1:3300"}, Strategy: v1.CephOverlapping, KeepPriorKeyCount: &k,
			Entities: []v1.CephEntity{{Name: "client.csi"}}}, fileStoreless{}, "")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	inPlace, err := New(&v1.CephSpec{Monitors: []string{"v2:10.0.0.1:3300"}, Entities: []v1.CephEntity{{Name: "client.x"}}}, fileStoreless{}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    *Backend
		st   v1.CredentialSetStatus
		want bool
	}{
		{"two priors, keep lowered to 0", keep(0), idle(n(2)), true},
		{"two priors, keep lowered to 1", keep(1), idle(n(2)), true},
		{"as many priors as kept", keep(2), idle(n(2)), false},
		{"fewer priors than kept", keep(2), idle(n(1)), false},
		{"unknown count is read once", keep(1), idle(nil), true},
		{"phase not written yet counts as idle", keep(0), with(func(s *v1.CredentialSetStatus) { s.Phase = "" }), true},
		{"not provisioned", keep(0), with(func(s *v1.CredentialSetStatus) { s.KeyGeneration = 0 }), false},
		{"rotating", keep(0), with(func(s *v1.CredentialSetStatus) { s.Phase, s.RotationID = v1.PhaseRotating, "r" }), false},
		{"distributed", keep(0), with(func(s *v1.CredentialSetStatus) { s.Phase, s.RotationID = v1.PhaseDistributed, "r" }), false},
		{"rolling back", keep(0), with(func(s *v1.CredentialSetStatus) { s.ResetPending = true }), false},
		{"InPlace keeps no priors", inPlace, idle(n(1)), false},
	} {
		if got := tc.b.TrimDue(tc.st); got != tc.want {
			t.Errorf("%s: TrimDue = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// fileStoreless is a KeyringStore for backends that never run a command.
type fileStoreless struct{ KeyringStore }
