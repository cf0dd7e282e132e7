package registry

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestTargetHook: a target naming a login goes through its backend's hook
// (the keys it keeps, renamed); one without login holds everything; a
// backend without the hook refuses a target naming one.
func TestTargetHook(t *testing.T) {
	isolate(t)
	sel := func(kind string) func(*v1.CredentialSet) bool {
		return func(cs *v1.CredentialSet) bool { return cs.Annotations["kind"] == kind }
	}
	Register(Entry{Kind: "withlogins", Field: "spec.withlogins", Selects: sel("withlogins"), Target: &TargetHook{
		Check: func(*v1.CredentialSet, v1.SecretTarget) error { return nil },
		Key: func(_ *v1.CredentialSet, t v1.SecretTarget, k string) (string, bool) {
			return strings.CutPrefix(k, t.Login+".")
		},
		Note: func(_ *v1.CredentialSet, t v1.SecretTarget) string { return " (" + t.Login + " only)" },
	}})
	Register(Entry{Kind: "nologins", Field: "spec.nologins", Selects: sel("nologins")})
	set := func(kind string) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"kind": kind}}}
	}
	data := map[string][]byte{"a.user": []byte("a1"), "b.user": []byte("b1")}
	got, err := TargetData(set("withlogins"), v1.SecretTarget{Login: "b"}, data)
	if err != nil || len(got) != 1 || string(got["user"]) != "b1" {
		t.Errorf("login b holds %q (%v), want only user: b1", got, err)
	}
	if got, _ := TargetData(set("withlogins"), v1.SecretTarget{}, data); len(got) != 2 {
		t.Errorf("a target without login holds %q, want every key", got)
	}
	if n := TargetNote(set("withlogins"), v1.SecretTarget{Login: "b"}); n != " (b only)" {
		t.Errorf("note %q", n)
	}
	if k, ok := TargetKey(set("nologins"), v1.SecretTarget{}, "a.user"); !ok || k != "a.user" {
		t.Errorf("without a hook a key stays itself: %q, %v", k, ok)
	}
	err = CheckTarget(set("nologins"), v1.SecretTarget{Namespace: "ns", Name: "s", Login: "b"})
	if _, spec := err.(*SpecError); !spec || !strings.Contains(err.Error(), "spec.nologins set has no logins") || !strings.Contains(err.Error(), "remove login") {
		t.Errorf("login on a backend without logins: %v", err)
	}
	if err := CheckTarget(set("nologins"), v1.SecretTarget{Namespace: "ns", Name: "s"}); err != nil {
		t.Errorf("a target without login refused: %v", err)
	}
}

// TestCheckTargets: a format that reads distribution[].entity takes one
// (and checks it), any other refuses it naming the formats that read one;
// an unknown format is refused with the registered ones.
func TestCheckTargets(t *testing.T) {
	isolate(t)
	Register(Entry{Kind: "k", Field: "spec.k", Selects: func(*v1.CredentialSet) bool { return true }})
	var checked []string
	check := func(_ *v1.CredentialSet, t v1.SecretTarget) error { checked = append(checked, t.Name); return nil }
	RegisterFormat(Format{Name: "Zone", Check: check, Entity: true})
	RegisterFormat(Format{Name: "Area", Check: check, Entity: true})
	RegisterFormat(Format{Name: "Flat", Check: check})
	for _, c := range []struct {
		target v1.SecretTarget
		err    string
	}{
		{v1.SecretTarget{Name: "native"}, ""},
		{v1.SecretTarget{Name: "zone", Format: "Zone", Entity: "e"}, ""},
		{v1.SecretTarget{Name: "flat", Format: "Flat"}, ""},
		{v1.SecretTarget{Name: "flat-e", Format: "Flat", Entity: "e"}, "distribution target ns/flat-e names entity e without a Area or Zone format: set format Area or Zone, or remove entity"},
		{v1.SecretTarget{Name: "native-e", Format: v1.FormatNative, Entity: "e"}, "distribution target ns/native-e names entity e without a Area or Zone format"},
		{v1.SecretTarget{Name: "odd", Format: "Odd"}, `distribution target ns/odd: unknown format "Odd" (Native, Area, Flat or Zone)`},
	} {
		c.target.Namespace = "ns"
		checked = nil
		err := CheckTargets(&v1.CredentialSet{Spec: v1.CredentialSetSpec{Distribution: []v1.SecretTarget{c.target}}})
		if c.err == "" {
			if err != nil {
				t.Errorf("%s refused: %v", c.target.Name, err)
			}
			if c.target.Format != "" && len(checked) != 1 {
				t.Errorf("%s: the format's own check did not run", c.target.Name)
			}
			continue
		}
		if _, spec := err.(*SpecError); !spec || !strings.HasPrefix(err.Error(), c.err) {
			t.Errorf("%s: %v, want a SpecError %q", c.target.Name, err, c.err)
		}
	}
}
