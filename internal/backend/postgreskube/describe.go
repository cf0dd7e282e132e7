package postgreskube

import (
	"context"
	"fmt"
	"io"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/postgres"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
)

// describe is how the plugin speaks of PostgreSQL sets: a new login role
// per generation, the old one dropped at discard.
var describe = registry.Describe{
	Name:    "PostgreSQL",
	Secrets: "passwords",
	Traits:  func(*v1.CredentialSet) engine.Traits { return engine.Traits{Overlap: true} },
	Words: func(cs *v1.CredentialSet) registry.Words {
		return registry.Words{
			Applying:       "the new login role is being created",
			Rotating:       "wait: creating the new login role and waiting for the replicas to replay it",
			BothWork:       "the old and the new login role both work until discard",
			RetireWait:     "the operator drops the old login role once every consumer of this set has moved (%s now)",
			Retired:        "the old login role was dropped",
			Retiring:       "wait: dropping the old login role (once none of its sessions is left), completing the rotation",
			AutoDiscard:    "discard happens automatically (the old login role is dropped once every consumer moved and its sessions ended)",
			DiscardNote:    " (the old login role is dropped once its sessions ended)",
			AlreadyRetired: "already dropped the old login role",
			RollbackSafe:   "until step 4 PostgreSQL has both the current and the new login role, so no consumer loses its login",
			Reset:          "once every consumer rolled out, the current login role gets the source Secret's password again (recreated if missing), then every other " + cs.Spec.Postgres.Login.Base + "_g<N> role, the new one among them, is dropped",
			ResetDone:      "PostgreSQL has only the current login role",
			SourceNote:     "the new login's password is stored there before the role is created",
		}
	},
	Plan: plan,
	RenderedKeys: func(cs *v1.CredentialSet) string {
		if cs.Spec.Postgres.Connection == nil {
			return "username, password"
		}
		return "username, password, host, port, dbname, uri, jdbc-uri, pgpass (CloudNativePG's application Secret layout)"
	},
	Then: func(_ *v1.CredentialSet, d registry.Discard) string {
		return fmt.Sprintf("Then: %s. The old login role is dropped once every consumer moved and none of its sessions is left.", d.When())
	},
	Show: registry.Show{Formats: []string{"plain", "env"}, Credential: credential},
	Help: registry.Help{
		Rotate:  "a new login role per generation; the old one works until\ndiscard",
		Abort:   "the new generation's login role is dropped",
		Discard: "the old login role is dropped, once every consumer moved",
		Show:    "plain (the password), env (PGUSER / PGPASSWORD)",
	},
	Rank: 4,
}

func newLogin(cs *v1.CredentialSet) string {
	return cs.Spec.Postgres.Login.Base + fmt.Sprintf("_g%d", engine.TargetGeneration(cs.Spec.Rotation, cs.Status))
}

func plan(_ context.Context, out io.Writer, cs *v1.CredentialSet, _ registry.Reader) error {
	spec := cs.Spec.Postgres
	fmt.Fprintf(out, "Instances: %s (the primary is read from each; rekey acts as the role in Secret %s/%s)\n", strings.Join(spec.Hosts, ", "), cs.Namespace, spec.Admin.SecretRef.Name)
	fmt.Fprintf(out, "New login role: %s, a member of %s acting as it, created next to the current one; both work until discard\n", newLogin(cs), spec.Login.Group)
	return nil
}

func credential(cs *v1.CredentialSet, p registry.Pick) (registry.Credential, error) {
	if p.User != "" || p.Entity != "" {
		return registry.Credential{}, fmt.Errorf("credentialset %q is a PostgreSQL set with a single login (a new role per generation), so show takes no --user or --entity: drop it", cs.Name)
	}
	c := registry.Credential{Who: "the PostgreSQL login",
		Note: fmt.Sprintf("this is its new login role %s (the old one works until discard)", newLogin(cs))}
	if p.Format == "env" {
		c.Keys = []string{postgres.KeyUsername, postgres.KeyPassword}
		c.Fields = func(v []string) []string { return []string{"PGUSER", v[0], "PGPASSWORD", v[1]} }
		return c, nil
	}
	c.Keys, c.Render = []string{postgres.KeyPassword}, registry.PlainLine
	return c, nil
}
