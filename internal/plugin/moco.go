package plugin

import (
	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/moco"
)

// asMOCO is a mysql.moco set as the operator sees it: MOCO's instances,
// admin and users, and, when the set names no distribution target, MOCO's
// user Secret (moco-<cluster>, the 8 passwords under MOCO's keys) as the
// Secret that holds its passwords. Other sets are returned as they are.
func asMOCO(cs *v1.CredentialSet) *v1.CredentialSet {
	if cs.Spec.MySQL == nil || cs.Spec.MySQL.MOCO == nil {
		return cs
	}
	out := cs.DeepCopy()
	out.Spec.MySQL = moco.DerivedSpec(cs.Spec.MySQL)
	if len(out.Spec.Distribution) == 0 {
		n := moco.NamesOf(cs.Namespace, cs.Spec.MySQL.MOCO.ClusterName)
		out.Spec.Distribution = []v1.SecretTarget{{Namespace: cs.Namespace, Name: n.UserSecret}}
	}
	return out
}
