package naming

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestNamesAreValidKubernetesKeys: every annotation and finalizer rekey
// makes from user-chosen names is a qualified name the API server
// accepts, however long the names, and distinct sets get distinct ones.
func TestNamesAreValidKubernetesKeys(t *testing.T) {
	long := strings.Repeat("a", 253)
	cases := []struct {
		name     string
		got      string
		wantPref string
	}{
		{"restart, short set", RestartAnnotation(set("shop", "orders")), "rekey.io/restart-orders-"},
		{"restart, longest set name", RestartAnnotation(set("shop", long)), "rekey.io/restart-aaaa"},
		{"consumer finalizer, short", ConsumerFinalizer(v1.KindDeployment, "shop", "api"), ConsumerFinalizerPrefix + "deployment-api-"},
		{"consumer finalizer, longest name", ConsumerFinalizer(v1.KindStatefulSet, "shop", long), ConsumerFinalizerPrefix + "statefulset-aaaa"},
		{"consumer finalizer, trailing dot trimmed", ConsumerFinalizer(v1.KindGroup, "", "g"+strings.Repeat(".", 60)), ConsumerFinalizerPrefix + "group-g-"},
		{"deprovision finalizer", DeprovisionFinalizer, "rekey.io/deprovision"},
	}
	for _, c := range cases {
		if errs := validation.IsQualifiedName(c.got); len(errs) > 0 {
			t.Errorf("%s: %q is not a qualified name: %v", c.name, c.got, errs)
		}
		if !strings.HasPrefix(c.got, c.wantPref) {
			t.Errorf("%s: %q does not start with %q", c.name, c.got, c.wantPref)
		}
	}
	if RestartAnnotation(set("a", "b-"+long)) == RestartAnnotation(set("a", "b-"+long+"x")) {
		t.Error("two sets whose names share the truncated part got one restart annotation")
	}
	if ConsumerFinalizer(v1.KindDeployment, "a", "api") == ConsumerFinalizer(v1.KindDeployment, "b", "api") {
		t.Error("consumers in two namespaces got one finalizer")
	}
}

func TestGenerationAndSecretNames(t *testing.T) {
	cases := []struct{ name, got, want string }{
		{"source Secret", SourceSecretName(set("shop", "orders")), "rekey.shop.orders"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
}

func set(ns, name string) *v1.CredentialSet {
	return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}
