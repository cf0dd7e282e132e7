package plugin

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestDeniedNamesTheRight: a refusal by the API server says which right
// kubectl rekey lacks and which shipped role grants it; other errors pass
// through untouched.
func TestDeniedNamesTheRight(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "rekey.io", Resource: "credentialsets"}, "db", errors.New("RBAC: no"))
	for _, tc := range []struct {
		need access
		ns   string
		want []string
	}{
		{patchSets, "shop", []string{"you may not patch credentialsets.rekey.io in namespace shop", "rekey-edit (or edit)", "--clusterrole=rekey-edit", "-n shop"}},
		{readEvents, "shop", []string{"you may not list events.events.k8s.io in namespace shop", "--clusterrole=rekey-view"}},
		{readSets, "", []string{"in every namespace (-A)", "-n <namespace>", "--clusterrole=rekey-view"}},
	} {
		got := denied(forbidden, tc.need, tc.ns).Error()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s in %q: %q does not say %q", tc.need.verb, tc.ns, got, w)
			}
		}
	}
	other := errors.New("connection refused")
	if denied(other, patchSets, "shop") != other {
		t.Error("an error that is not a refusal was changed")
	}
}
