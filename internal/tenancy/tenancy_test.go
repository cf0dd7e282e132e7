package tenancy

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func set(dist []v1.SecretTarget, cons []v1.ConsumerRef) *v1.CredentialSet {
	return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db"},
		Spec: v1.CredentialSetSpec{Distribution: dist, Consumers: cons}}
}

func TestDecide(t *testing.T) {
	own := []v1.SecretTarget{{Namespace: "team-a", Name: "creds"}}
	cases := []struct {
		name    string
		cs      *v1.CredentialSet
		trusted map[string][]string
		// wantField is the field of the refused reach, "" when allowed.
		wantField string
		wantText  string
	}{
		{name: "own namespace only", cs: set(own, []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "app"}})},
		{name: "nothing named", cs: set(nil, nil)},
		{name: "foreign Secret without consent", cs: set(append(own, v1.SecretTarget{Namespace: "team-b", Name: "x"}), nil),
			wantField: "spec.distribution[1].namespace", wantText: "kubectl annotate namespace team-b rekey.io/trusted-source-namespaces=team-a"},
		{name: "foreign Secret, consent for another namespace", cs: set([]v1.SecretTarget{{Namespace: "team-b", Name: "x"}}, nil),
			trusted: map[string][]string{"team-b": {"team-c"}}, wantField: "spec.distribution[0].namespace"},
		{name: "foreign Secret with consent", cs: set([]v1.SecretTarget{{Namespace: "team-b", Name: "x"}}, nil),
			trusted: map[string][]string{"team-b": {"team-c", "team-a"}}},
		{name: "consent does not leak to a third namespace", cs: set([]v1.SecretTarget{{Namespace: "team-b", Name: "x"}, {Namespace: "team-c", Name: "y"}}, nil),
			trusted: map[string][]string{"team-b": {"team-a"}}, wantField: "spec.distribution[1].namespace"},
		{name: "operator namespace as distribution target", cs: set([]v1.SecretTarget{{Namespace: "rekey-system", Name: "rekey.team-b.db"}}, nil),
			wantField: "spec.distribution[0].namespace", wantText: "operator's own"},
		{name: "operator namespace even with consent", cs: set([]v1.SecretTarget{{Namespace: "rekey-system", Name: "x"}}, nil),
			trusted: map[string][]string{"rekey-system": {"team-a"}}, wantField: "spec.distribution[0].namespace"},
		{name: "foreign consumer without consent", cs: set(own, []v1.ConsumerRef{{Kind: v1.KindDeployment, Namespace: "team-b", Name: "api"}}),
			wantField: "spec.consumers[0].namespace", wantText: "restart Deployment team-b/api"},
		{name: "foreign consumer with consent", cs: set(own, []v1.ConsumerRef{{Kind: v1.KindStatefulSet, Namespace: "team-b", Name: "api"}}),
			trusted: map[string][]string{"team-b": {"team-a"}}},
		{name: "consumer in operator namespace", cs: set(nil, []v1.ConsumerRef{{Kind: v1.KindDeployment, Namespace: "rekey-system", Name: "rekey-controller-manager"}}),
			wantField: "spec.consumers[0].namespace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.cs.Namespace, "rekey-system", Reaches(c.cs), c.trusted)
			if c.wantField == "" {
				if d != nil {
					t.Fatalf("refused: %s", d.Message)
				}
				return
			}
			if d == nil {
				t.Fatalf("allowed; want %s refused", c.wantField)
			}
			if d.Reach.Field != c.wantField || !strings.HasPrefix(d.Message, c.wantField+": ") || !strings.Contains(d.Message, c.wantText) {
				t.Fatalf("refused %s with %q; want field %s and text %q", d.Reach.Field, d.Message, c.wantField, c.wantText)
			}
		})
	}
}

func TestTrusted(t *testing.T) {
	got := Trusted(map[string]string{TrustAnnotation: " team-a, ,team-b ,"})
	if strings.Join(got, "|") != "team-a|team-b" {
		t.Fatalf("got %q", got)
	}
	if len(Trusted(nil)) != 0 {
		t.Fatal("no annotation must trust nobody")
	}
}

func TestForeign(t *testing.T) {
	cs := set([]v1.SecretTarget{{Namespace: "team-b", Name: "x"}, {Namespace: "team-a", Name: "y"}},
		[]v1.ConsumerRef{{Kind: v1.KindDeployment, Namespace: "team-b", Name: "z"}, {Kind: v1.KindDeployment, Namespace: "team-c", Name: "z"}})
	if got := strings.Join(Foreign(cs.Namespace, Reaches(cs)), ","); got != "team-b,team-c" {
		t.Fatalf("got %s", got)
	}
}
