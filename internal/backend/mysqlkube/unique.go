package mysqlkube

import (
	"context"
	"fmt"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/mysql"
	"rekey.io/rekey/internal/backend/registry"
)

// uniqueUsers refuses a set that would rotate a user another set on the
// same instances rotates, or the user that set connects as (mysql.Clash,
// mysql.AdminClash): one's rotation would lock out the other's consumers
// or its admin. "The same instances" is what makes two sets take turns:
// a lock key in common (the same host:port, StatefulSet or MOCO cluster).
//
// A set that provisioned keeps its users (of two that did, the one
// created first), so a working set is never stopped by a newcomer, and
// the newcomer changes nothing on the instances until its spec is fixed.
// While neither has provisioned neither is refused: a set that merely came
// first (with an admin password that does not work, say) must not squat a
// user another namespace's set needs; of two that provision at once the
// lock lets one go first, and the other then finds the user holding a
// password it does not know (Provision refuses that) or is refused here.
func uniqueUsers(ctx context.Context, k registry.Kube, cs *v1.CredentialSet) error {
	if !cs.DeletionTimestamp.IsZero() && cs.Status.KeyGeneration == 0 {
		// A set that never provisioned holds nothing, and deleting it
		// drops only users marked as its own: no refusal may keep it
		// (and its namespace) from going.
		return nil
	}
	sets, err := k.Sets(ctx)
	if err != nil {
		return err
	}
	mine := lockKeys(cs)
	for i := range sets {
		o := &sets[i]
		if o.UID == cs.UID || o.Spec.MySQL == nil || !keepsUsers(o, cs) || !shareKey(mine, lockKeys(o)) {
			continue
		}
		what := mysql.Clash(o.Spec.MySQL, cs.Spec.MySQL)
		if what == "" {
			what = mysql.AdminClash(o.Spec.MySQL, cs.Spec.MySQL)
		}
		if what != "" {
			return &registry.SpecError{Msg: fmt.Sprintf("%s is on the same MySQL instances and keeps its users; %s. This set changed nothing",
				registry.OtherSet(cs, o), what)}
		}
	}
	return nil
}

// keepsUsers: o keeps clashing users rather than cs — it provisioned and
// cs has not, or both have and o was created first (by name when the API
// server gave both the same second), so that of two clashing sets exactly
// one, always the same, is refused.
func keepsUsers(o, cs *v1.CredentialSet) bool {
	if op, cp := o.Status.KeyGeneration > 0, cs.Status.KeyGeneration > 0; op != cp || !op {
		return op
	}
	if ta, tb := o.CreationTimestamp.Time, cs.CreationTimestamp.Time; !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return o.Namespace+"/"+o.Name < cs.Namespace+"/"+cs.Name
}

// shareKey: two sets' lock keys name a common instance.
func shareKey(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}
