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
