package e2e

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// TestCephDeletion: Overlapping entities, keepPriorKeyCount 1, so that an
// Idle set holds a prior generation a Discard deletion must remove.
func TestCephDeletion(t *testing.T) {
	c := testenv.CephForTest(t)
	startManager(t, cp.Config, withCephWorkDir(c))
	runDeletionMatrix(t, deletionBackend{
		newSet: func(t testing.TB, ns, name string) *v1.CredentialSet {
			return cephSet(t, c, ns, name, v1.CephOverlapping, v1.CephEntity{Name: "client." + name, Caps: v1.CephCaps{Mon: "allow r"}})
		},
		creds: func(t testing.TB, data map[string][]byte, suffix string) []cred {
			var out []cred
			for k, v := range data {
				base, ok := strings.CutSuffix(k, suffix)
				if suffix == "" {
					ok = !strings.HasSuffix(k, engine.PendingSuffix)
				}
				if ok && strings.HasPrefix(base, "client.") {
					entity, key := keyOf(t, v)
					out = append(out, cred{entity, key})
				}
			}
			return out
		},
		accepts: func(t testing.TB, k cred) []bool { return []bool{cephAuthenticates(t, c, k.user, k.secret)} },
	})
}
