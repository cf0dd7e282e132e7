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
	"rekey.io/rekey/internal/reason"
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
			Reset:          "once every consumer rolled out, each current login role gets the source Secret's password again (recreated if missing), then every other " + generationPatterns(cs) + " role, the new ones among them, is dropped",
			ResetDone:      "PostgreSQL has only the current login role",
			SourceNote:     "the new login's password is stored there before the role is created",
		}
	},
	Plan:         plan,
	RenderedKeys: renderedKeys,
	Then: func(_ *v1.CredentialSet, d registry.Discard) string {
		return fmt.Sprintf("Then: %s. The old login role is dropped once every consumer moved and none of its sessions is left.", d.When())
	},
	Show: registry.Show{Formats: []string{"plain", "env"}, Credential: credential,
		Pick: &registry.PickFlag{Flag: "user", Noun: "login", Form: "its base", Choices: loginChoices}},
	Repairs: []registry.Repair{{
		Reason: reason.DualPasswordExists,
		Cause:  "another generation's PostgreSQL login role exists beside the current one, which the set's status does not account for (a status restored from a backup?), so rotations are refused",
		Help:   "a PostgreSQL login role of another generation exists:\nthe server is reset to the current logins",
		Held:   "another generation's login role the status does not account for still logs in",
		LetGo:  "leaving both login roles",
	}},
	Help: registry.Help{
		Rotate:  "a new login role per generation; the old one works until\ndiscard",
		Abort:   "the new generation's login role is dropped",
		Discard: "the old login role is dropped, once every consumer moved",
		Show:    "plain (the password), env (PGUSER / PGPASSWORD); --user\npicks the login (its base) when the set has several",
		New:     "a PostgreSQL login role",
		Check:   "the ALTER ROLE that gives the admin CREATEROLE",
	},
	Rank: 4,
}

func newLogin(cs *v1.CredentialSet, base string) string {
	return base + fmt.Sprintf("_g%d", engine.TargetGeneration(cs.Spec.Rotation, cs.Status))
}

func bases(cs *v1.CredentialSet) []string {
	var out []string
	for _, l := range cs.Spec.Postgres.RotatingLogins() {
		out = append(out, l.Base)
	}
	return out
}

// generationPatterns names the set's login roles, "app_g<N>, report_g<N>".
func generationPatterns(cs *v1.CredentialSet) string {
	var out []string
	for _, b := range bases(cs) {
		out = append(out, b+"_g<N>")
	}
	return strings.Join(out, ", ")
}

// layout is the keys one login gets in a distributed Secret.
func layout(cs *v1.CredentialSet) string {
	if cs.Spec.Postgres.Connection == nil {
		return "username, password"
	}
	return "username, password, host, port, dbname, uri, jdbc-uri, pgpass (CloudNativePG's application Secret layout)"
}

func renderedKeys(cs *v1.CredentialSet) string {
	if len(cs.Spec.Postgres.Logins) == 0 {
		return layout(cs)
	}
	return "for each login, " + layout(cs) + ", each key after the login's base and a dot (" + bases(cs)[0] + ".username, " + bases(cs)[0] + ".password, ...)"
}

func plan(_ context.Context, out io.Writer, cs *v1.CredentialSet, _ registry.Reader) error {
	spec := cs.Spec.Postgres
	fmt.Fprintf(out, "Instances: %s (the primary is read from each; rekey acts as the role in Secret %s/%s)\n", instancesWords(cs), cs.Namespace, spec.Admin.SecretRef.Name)
	for _, l := range spec.RotatingLogins() {
		fmt.Fprintf(out, "New login role: %s, a member of %s acting as it, created next to the current one; both work until discard\n", newLogin(cs, l.Base), l.Group)
	}
	return nil
}

// instancesWords names the instances: the hosts, or the StatefulSets'
// pods.
func instancesWords(cs *v1.CredentialSet) string {
	spec := cs.Spec.Postgres
	if len(spec.StatefulSets) == 0 {
		return strings.Join(spec.Hosts, ", ")
	}
	var out []string
	for _, s := range spec.StatefulSets {
		out = append(out, "the pods of StatefulSet "+cs.Namespace+"/"+s.Name)
	}
	return strings.Join(out, ", ")
}

func credential(cs *v1.CredentialSet, p registry.Pick) (registry.Credential, error) {
	spec := cs.Spec.Postgres
	base, err := pickLogin(cs.Name, spec, p.Identity)
	if err != nil {
		return registry.Credential{}, err
	}
	prefix := postgres.Prefix(spec, base)
	c := registry.Credential{Who: "the PostgreSQL login " + base,
		Note: fmt.Sprintf("this is its new login role %s (the old one works until discard)", newLogin(cs, base))}
	if p.Format == "env" {
		c.Keys = []string{prefix + postgres.KeyUsername, prefix + postgres.KeyPassword}
		c.Fields = func(v []string) []string { return []string{"PGUSER", v[0], "PGPASSWORD", v[1]} }
		return c, nil
	}
	c.Keys, c.Render = []string{prefix + postgres.KeyPassword}, registry.PlainLine
	return c, nil
}

// loginChoices are the bases --user takes: none for a single-login set,
// which show prints without one.
func loginChoices(cs *v1.CredentialSet) []string {
	spec := cs.Spec.Postgres
	if len(spec.Logins) == 0 {
		return nil
	}
	var all []string
	for _, l := range spec.RotatingLogins() {
		all = append(all, l.Base)
	}
	return all
}

// pickLogin is the login show prints: the one --user names (by its base),
// or the set's only one.
func pickLogin(set string, spec *v1.PostgresSpec, user string) (string, error) {
	logins := spec.RotatingLogins()
	if len(spec.Logins) == 0 {
		if user != "" {
			return "", fmt.Errorf("credentialset %q is a PostgreSQL set with a single login (a new role per generation), so show takes no --user: drop it", set)
		}
		return logins[0].Base, nil
	}
	var all []string
	for _, l := range logins {
		if l.Base == user {
			return user, nil
		}
		all = append(all, l.Base)
	}
	if user == "" && len(all) == 1 {
		return all[0], nil
	}
	return "", fmt.Errorf("credentialset %q rotates several PostgreSQL logins: name one with --user (%s)", set, registry.OneOf(all))
}
