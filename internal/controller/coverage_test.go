package controller

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestSecretHash: the hash names a distribution by set, generation and
// the rotation that produced it; the generation being distributed
// belongs to the rotation under way, the served one to the last done.
func TestSecretHash(t *testing.T) {
	set := func(ns string, keyGen int64, last, cur string) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
			Status: v1.CredentialSetStatus{KeyGeneration: keyGen, LastRotationID: last, RotationID: cur}}
	}
	base := secretHash(set("a", 2, "r1", "r2"), 2)
	if len(base) != 12 {
		t.Fatalf("hash %q, want 12 hex digits", base)
	}
	for _, c := range []struct {
		name string
		cs   *v1.CredentialSet
		gen  int64
		same bool
	}{
		{"same set, generation and rotation", set("a", 2, "r1", "r2"), 2, true},
		{"rotation under way does not change the served one", set("a", 2, "r1", "r9"), 2, true},
		{"another namespace", set("b", 2, "r1", "r2"), 2, false},
		{"another generation", set("a", 2, "r1", "r2"), 3, false},
		{"the served generation's rotation differs", set("a", 2, "r0", "r2"), 2, false},
		{"no key generation yet: the last rotation names it", set("a", 0, "r1", "r2"), 2, true},
	} {
		if got := secretHash(c.cs, c.gen); (got == base) != c.same {
			t.Errorf("%s: %q against %q, want same=%v", c.name, got, base, c.same)
		}
	}
	// A generation other than the key generation is the rotation under
	// way: its id, not the last one, names it.
	if secretHash(set("a", 2, "r1", "r2"), 3) == secretHash(set("a", 2, "r1", "r3"), 3) {
		t.Error("the distributed generation's hash ignores the rotation under way")
	}
}

func TestPrevious(t *testing.T) {
	last := []v1.ConsumerStatus{
		{Kind: v1.KindDeployment, Namespace: "a", Name: "web", SecretHash: "h1"},
		{Kind: v1.KindStatefulSet, Namespace: "a", Name: "web", SecretHash: "h2"},
		{Kind: v1.KindGroup, Name: "web", SecretHash: "h3"},
	}
	for _, c := range []struct {
		kind     v1.ConsumerKind
		ns, name string
		want     string // "" for not found
	}{
		{v1.KindDeployment, "a", "web", "h1"},
		{v1.KindStatefulSet, "a", "web", "h2"},
		{v1.KindGroup, "", "web", "h3"},
		{v1.KindDeployment, "b", "web", ""},
		{v1.KindDeployment, "a", "api", ""},
	} {
		got := previous(last, c.kind, c.ns, c.name)
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%s %s/%s: found %+v, want none", c.kind, c.ns, c.name, *got)
		case c.want != "" && (got == nil || got.SecretHash != c.want):
			t.Errorf("%s %s/%s: found %+v, want the entry with %s", c.kind, c.ns, c.name, got, c.want)
		}
	}
	// The entry found is the one in last, so that a caller's change sticks.
	if p := previous(last, v1.KindGroup, "", "web"); p != &last[2] {
		t.Error("previous returned a copy")
	}
}

// TestEarlierHashes: the distributions before the current one that the
// set can still identify, each once and never the current one.
func TestEarlierHashes(t *testing.T) {
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "orders"},
		Status: v1.CredentialSetStatus{KeyGeneration: 2, LastRotationID: "r1", RotationID: "r2"}}
	atKey := secretHash(cs, 2)
	group := func(h string) []v1.ConsumerStatus {
		return []v1.ConsumerStatus{{Kind: v1.KindGroup, Name: "web", SecretHash: h}}
	}
	for _, c := range []struct {
		name    string
		keyGen  int64
		known   v1.CredentialSetStatus
		current string
		want    []string
	}{
		{"key generation, recorded and group's", 2, v1.CredentialSetStatus{SecretHash: "rec", Consumers: group("grp")}, "cur", []string{atKey, "rec", "grp"}},
		{"the current one left out", 2, v1.CredentialSetStatus{SecretHash: "cur"}, "cur", []string{atKey}},
		{"current is the key generation's", 2, v1.CredentialSetStatus{SecretHash: "rec"}, atKey, []string{"rec"}},
		{"each once", 2, v1.CredentialSetStatus{SecretHash: atKey, Consumers: group(atKey)}, "cur", []string{atKey}},
		{"no key generation yet", 0, v1.CredentialSetStatus{SecretHash: "rec"}, "cur", []string{"rec"}},
		{"another group's coverage is not this one's", 2, v1.CredentialSetStatus{Consumers: []v1.ConsumerStatus{{Kind: v1.KindGroup, Name: "api", SecretHash: "other"}}}, "cur", []string{atKey}},
		{"nothing known", 0, v1.CredentialSetStatus{}, "cur", nil},
	} {
		cs := cs.DeepCopy()
		cs.Status.KeyGeneration = c.keyGen
		if got := earlierHashes(cs, c.known, "web", c.current); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestMissingMembers: the members not moved yet, at most five named so
// that a condition's message stays short.
func TestMissingMembers(t *testing.T) {
	for _, c := range []struct {
		all, moved, want []string
	}{
		{nil, nil, nil},
		{[]string{"a", "b"}, []string{"a", "b"}, nil},
		{[]string{"a", "b", "c"}, []string{"b"}, []string{"a", "c"}},
		{[]string{"a", "b", "c", "d"}, nil, []string{"a", "b", "c", "d"}},
		{[]string{"a", "b", "c", "d", "e", "f", "g"}, []string{"b"}, []string{"a", "c", "d", "e", "f", "…"}},
		{[]string{"a", "b", "c", "d", "e", "f"}, []string{"f"}, []string{"a", "b", "c", "d", "e"}},
	} {
		if got := missingMembers(c.all, c.moved); !slices.Equal(got, c.want) {
			t.Errorf("missingMembers(%q, %q) = %q, want %q", c.all, c.moved, got, c.want)
		}
	}
}
