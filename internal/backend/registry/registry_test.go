package registry

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// The registry's own test binary registers entries of its own: no real
// backend is linked in.
func TestForAndMessages(t *testing.T) {
	isolate(t)
	byAnnot := func(kind string) Entry {
		return Entry{Kind: kind, Field: "spec." + kind,
			Selects: func(cs *v1.CredentialSet) bool { return cs.Annotations["kind"] == kind }}
	}
	Register(byAnnot("a"))
	Register(byAnnot("b"))
	Register(byAnnot("c"))
	RegisterFormat(Format{Name: "Zed"})
	RegisterFormat(Format{Name: "Alpha"})
	for _, tc := range []struct{ kind, want string }{{"b", "b"}, {"c", "c"}, {"none", ""}} {
		e, ok := For(&v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"kind": tc.kind}}})
		if e.Kind != tc.want || ok != (tc.want != "") {
			t.Errorf("For(%s) = %q, %v", tc.kind, e.Kind, ok)
		}
	}
	if got, want := NoBlock(), "no backend block: set spec.a, spec.b or spec.c"; got != want {
		t.Errorf("NoBlock() = %q, want %q", got, want)
	}
	if got, want := FormatNames(), "Native, Alpha or Zed"; got != want {
		t.Errorf("FormatNames() = %q, want %q", got, want)
	}
	if _, ok := FormatFor(v1.FormatNative); ok {
		t.Error("Native is the backend's own rendering, never a registered format")
	}
	defer func() {
		if recover() == nil {
			t.Error("a second backend of one kind was registered")
		}
	}()
	Register(byAnnot("a"))
}

func TestDiscardWhenAndUnknownFormat(t *testing.T) {
	cmd := "kubectl rekey discard s -n ns"
	for _, c := range []struct {
		d    Discard
		want string
	}{
		{Discard{Auto: true, Command: cmd}, "once every consumer rolled out and the grace period passed, the rotation completes automatically (discardPolicy AfterRollout)"},
		{Discard{Held: true, Command: cmd}, "once every client uses the new credentials, run kubectl rekey discard s -n ns (discardPolicy AfterRollout, but no consumer is declared, so the operator does not discard by itself)"},
		{Discard{Command: cmd}, "once consumers rolled out and work, run kubectl rekey discard s -n ns (discardPolicy Manual)"},
	} {
		if got := c.d.When(); got != c.want {
			t.Errorf("%+v.When() = %q, want %q", c.d, got, c.want)
		}
	}
	s := Show{Formats: []string{"plain", "env"}}
	if got, want := s.UnknownFormat("Zed", "url").Error(), `unknown format "url" for a Zed set: use plain or env`; got != want {
		t.Errorf("UnknownFormat = %q, want %q", got, want)
	}
	s.Unqualified = true
	if got, want := s.UnknownFormat("Zed", "url").Error(), `unknown format "url": use plain or env`; got != want {
		t.Errorf("UnknownFormat, unqualified = %q, want %q", got, want)
	}
}

func TestOtherSet(t *testing.T) {
	me := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "orders", Name: "db"}}
	for _, tc := range []struct{ ns, name, want string }{
		{"orders", "queue", "CredentialSet orders/queue"},
		{"payments", "queue", "a CredentialSet in another namespace"},
	} {
		o := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: tc.name}}
		if got := OtherSet(me, o); got != tc.want {
			t.Errorf("OtherSet(%s/%s) = %q, want %q", tc.ns, tc.name, got, tc.want)
		}
	}
}
