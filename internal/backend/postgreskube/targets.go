package postgreskube

import (
	"fmt"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/postgres"
	"rekey.io/rekey/internal/backend/registry"
)

// target serves distribution targets carrying one login (distribution[].
// login), in the layout an application of that login reads.
var target = &registry.TargetHook{
	Check: func(cs *v1.CredentialSet, t v1.SecretTarget) error {
		if err := postgres.CheckTargetLogin(cs.Spec.Postgres, t.Login); err != nil {
			return &registry.SpecError{Msg: fmt.Sprintf("distribution target %s/%s: %v", t.Namespace, t.Name, err)}
		}
		return nil
	},
	Key: func(cs *v1.CredentialSet, t v1.SecretTarget, k string) (string, bool) {
		return postgres.TargetKey(cs.Spec.Postgres, t.Login, k)
	},
	Note: func(cs *v1.CredentialSet, t v1.SecretTarget) string {
		return fmt.Sprintf(" (login %s only: %s)", t.Login, layout(cs))
	},
}
