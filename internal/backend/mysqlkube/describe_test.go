package mysqlkube

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestAsMOCO(t *testing.T) {
	plain := &v1.CredentialSet{Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{Preset: "moco"}}}
	if asMOCO(plain) != plain {
		t.Fatal("a set without mysql.moco was changed")
	}
	cs := &v1.CredentialSet{Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{MOCO: &v1.MOCOSpec{ClusterName: "db"}}}}
	cs.Namespace = "shop"
	got := asMOCO(cs)
	if got.Spec.MySQL.Admin.User != "moco-admin" || got.Spec.MySQL.Preset != "moco" || got.Spec.MySQL.Instances.StatefulSet.Name != "moco-db" {
		t.Fatalf("derived spec %+v", got.Spec.MySQL)
	}
	if len(got.Spec.Distribution) != 1 || got.Spec.Distribution[0] != (v1.SecretTarget{Namespace: "shop", Name: "moco-db"}) {
		t.Fatalf("show reads %+v, want MOCO's user Secret shop/moco-db", got.Spec.Distribution)
	}
	if cs.Spec.MySQL.Preset != "" || len(cs.Spec.Distribution) != 0 {
		t.Fatal("the set itself was changed")
	}
	cs.Spec.Distribution = []v1.SecretTarget{{Namespace: "shop", Name: "mine"}}
	if got := asMOCO(cs); got.Spec.Distribution[0].Name != "mine" {
		t.Fatalf("a set's own distribution target replaced: %+v", got.Spec.Distribution)
	}
}

func TestMycnfValueEscapes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain0K", "plain0K"},
		{"has space", "has space"},
		{" lead", `" lead"`},
		{"a#b", `"a#b"`},
		{`say "hi"`, `'say "hi"'`},
		{`back\slash`, `back\\slash`},
		{"new\nline", `new\nline`},
		{"", `""`},
	} {
		if got, err := mycnfValue(c.in); err != nil || got != c.want {
			t.Errorf("mycnfValue(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := mycnfValue(`both ' and "`); err == nil {
		t.Error("a value with both quote characters was written")
	}
}
