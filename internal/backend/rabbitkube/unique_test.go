package rabbitkube

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestClash(t *testing.T) {
	spec := func(base, adopt string) *v1.RabbitMQSpec {
		s := &v1.RabbitMQSpec{User: v1.RabbitMQUser{Base: base}}
		if adopt != "" {
			s.Adopt = &v1.RabbitMQAdopt{User: adopt}
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		me, o *v1.RabbitMQSpec
		want  string // part of the message, "" for no clash
	}{
		{"same base", spec("app", ""), spec("app", ""), `already rotates user base "app"`},
		{"other bases", spec("app", ""), spec("web", ""), ""},
		{"my adopted user is one of its generations", spec("app", "web-g3"), spec("web", ""), "adopt.user web-g3 is one of them"},
		{"its adopted user is one of my generations", spec("app", ""), spec("web", "app-g1"), "adopted user app-g1"},
		{"both adopt the same user: shared, no clash", spec("app", "legacy"), spec("web", "legacy"), ""},
	} {
		got := clash(tc.me, tc.o)
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: clash = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPrecedes(t *testing.T) {
	at := func(sec int) metav1.Time { return metav1.NewTime(time.Unix(int64(sec), 0)) }
	set := func(uid string, created int, gen int64) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{UID: types.UID("uid-" + uid), CreationTimestamp: at(created)},
			Status: v1.CredentialSetStatus{KeyGeneration: gen}}
	}
	for _, tc := range []struct {
		name  string
		o, cs *v1.CredentialSet
		want  bool
	}{
		{"it provisioned, this set has not", set("b", 20, 1), set("a", 10, 0), true},
		{"this set provisioned, it has not", set("a", 10, 0), set("b", 20, 1), false},
		{"neither provisioned: the earlier one does not squat", set("b", 10, 0), set("a", 20, 0), false},
		{"neither provisioned: nor the later one", set("a", 20, 0), set("b", 10, 0), false},
		{"both provisioned: the earlier one", set("b", 10, 1), set("a", 20, 1), true},
		{"both provisioned, the same second: the smaller UID", set("a", 10, 1), set("b", 10, 1), true},
		{"both provisioned, the same second, the larger UID", set("b", 10, 1), set("a", 10, 1), false},
	} {
		if got := precedes(tc.o, tc.cs); got != tc.want {
			t.Errorf("%s: precedes = %v, want %v", tc.name, got, tc.want)
		}
	}
}
