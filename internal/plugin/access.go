package plugin

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// access is a right kubectl rekey needs, and the shipped role that grants
// it (aggregated into the built-in view, edit and admin roles).
type access struct {
	verb, resource, role string
}

var (
	readSets   = access{"get and list", "credentialsets.rekey.io", "rekey-view (or view)"}
	readEvents = access{"list", "events.events.k8s.io", "rekey-view (or view)"}
	patchSets  = access{"patch", "credentialsets.rekey.io", "rekey-edit (or edit)"}
)

// denied turns the API server's refusal of what kubectl rekey needs into
// one that names the missing right and the role that grants it; any other
// error is returned as it is.
func denied(err error, need access, ns string) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	where := "namespace " + ns
	if ns == "" {
		where = "every namespace (-A)"
	}
	return fmt.Errorf("%w\nyou may not %s %s in %s, which this command needs: ask for the %s role there, e.g. kubectl create rolebinding -n %s rekey-you --clusterrole=%s --user=<you> (with a Helm install the roles are named <release>-view and <release>-edit)",
		err, need.verb, need.resource, where, need.role, nsOrPlaceholder(ns), roleName(need.role))
}

func nsOrPlaceholder(ns string) string {
	if ns == "" {
		return "<namespace>"
	}
	return ns
}

// roleName is the ClusterRole of "rekey-view (or view)".
func roleName(role string) string {
	for i, r := range role {
		if r == ' ' {
			return role[:i]
		}
	}
	return role
}
