package explorer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// The PostgreSQL world's spec: what spec.postgres says of the logins, of
// terminateSessions and of adopt. The model carries it in an annotation of
// the set (PostgresSpecAnnotation), because a spec.postgres block would
// make the registry select the real PostgreSQL backend instead of the
// model, as the MySQL model carries its users and instances; the backend
// reads it from the set each reconcile reads, as the real one reads its
// block. Its logins are the PostgreSQL backend's (logins.go): with
// spec.postgres.login one login, base app in group app_owner, under the
// source Secret's keys username and password; with spec.postgres.logins
// two, app (app_owner) and rep (rep_reader), each under its own keys, its
// base and a dot before them (app.username, rep.password), each with its
// own generation roles, app_g<N> and rep_g<N> (TestSeveralLogins,
// TestLoginKeys).
const (
	// PostgresSpecAnnotation lists the world's options, comma-separated:
	// logins, terminate, adopt.
	PostgresSpecAnnotation = "explorer.rekey.io/postgres"
	pgRepBase              = "rep"
	pgRepGroup             = "rep_reader"
	// pgAdopted is the role applications log in as before rekey
	// (spec.postgres.adopt, or the second item's adopt with logins), with
	// pgAdoptedPassword, which the adoption's passwordSecretRef holds.
	pgAdopted         = "legacy"
	pgAdoptedPassword = "legacy-0"
)

// pgConfigure is Start's for the PostgreSQL world: o's options as the
// set's spec, and what the instances hold before rekey for them (the
// second login's group; the role to adopt, unmarked, with its password).
func pgConfigure(w *World, o Options) {
	var opts []string
	for _, o := range []struct {
		on   bool
		name string
	}{{o.Logins, "logins"}, {o.TerminateSessions, "terminate"}, {o.Adopt, "adopt"}} {
		if o.on {
			opts = append(opts, o.name)
		}
	}
	if len(opts) == 0 {
		return
	}
	w.Set.Annotations[PostgresSpecAnnotation] = strings.Join(opts, ",")
	for _, in := range w.Instances {
		if o.Logins {
			in.set(pgRepGroup, Account{Exists: true})
		}
		if o.Adopt {
			in.set(pgAdopted, Account{Exists: true, Primary: pgAdoptedPassword})
		}
	}
}

func pgOption(cs *v1.CredentialSet, name string) bool {
	return slices.Contains(strings.Split(cs.Annotations[PostgresSpecAnnotation], ","), name)
}

// pgLogin is one login the set rotates (the backend's login).
type pgLogin struct {
	base, group, prefix string
	// adopt is the role this login adopts ("": none).
	adopt string
	// pw begins the model's passwords for it (distinct per login).
	pw string
}

func (l pgLogin) userKey() string          { return l.prefix + pgUserKey }
func (l pgLogin) passwordKey() string      { return l.prefix + pgPasswordKey }
func (l pgLogin) adopted(user string) bool { return l.adopt != "" && user == l.adopt }

// pgLoginsOf are cs's logins, in the spec's order.
func pgLoginsOf(cs *v1.CredentialSet) []pgLogin {
	adopt := ""
	if pgOption(cs, "adopt") {
		adopt = pgAdopted
	}
	if base := cs.Annotations[PostgresBaseAnnotation]; base != "" {
		return []pgLogin{{base: base, group: base + "_owner", pw: base + "-"}} // pgtwosets.go
	}
	if !pgOption(cs, "logins") {
		return []pgLogin{{base: pgBase, group: pgGroup, adopt: adopt, pw: "pw-"}}
	}
	return []pgLogin{{base: pgBase, group: pgGroup, prefix: pgBase + ".", pw: "pw-"},
		{base: pgRepBase, group: pgRepGroup, prefix: pgRepBase + ".", adopt: adopt, pw: "rpw-"}}
}

// pgKeys are the source Secret's keys of cs (the backend's Keys).
func pgKeys(cs *v1.CredentialSet) []string {
	var keys []string
	for _, l := range pgLoginsOf(cs) {
		keys = append(keys, l.userKey(), l.passwordKey())
	}
	return keys
}

// pgCredLogins are the roles creds (a pod's, a Secret's) log in as, each
// with its password.
func pgCredLogins(w *World, creds map[string]string) map[string]string {
	out := map[string]string{}
	for _, l := range pgLoginsOf(w.Set) {
		if user := creds[l.userKey()]; user != "" {
			out[user] = creds[l.passwordKey()]
		}
	}
	return out
}

// pgShown is what a Secret or the pod holds, for traces: each login's
// role/password.
func pgShown(w *World, get func(k string) string) string {
	var out []string
	for _, l := range pgLoginsOf(w.Set) {
		if get(l.userKey()) != "" {
			out = append(out, get(l.userKey())+"/"+get(l.passwordKey()))
		}
	}
	return strings.Join(out, ",")
}

// pgGenerationOf is N of a role named <base>_g<N> (generationOf's rule:
// no leading zero, N > 0).
func pgGenerationOf(base, role string) (int64, bool) {
	rest, ok := strings.CutPrefix(role, base+"_g")
	if !ok || rest == "" || strings.TrimLeft(rest, "0123456789") != "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil && n > 0
}

// pgRole: name is one the set may make or adopt (the invariants' mine).
func pgRole(w *World, name string) bool {
	for _, l := range pgLoginsOf(w.Set) {
		if _, ok := pgGenerationOf(l.base, name); ok || l.adopted(name) {
			return true
		}
	}
	return false
}

// pgIdentity is one login's role and password, as secrets hold them.
type pgIdentity struct {
	pgLogin
	user, pw string
}

func (b *pgBackend) logins() []pgLogin { return pgLoginsOf(b.cs) }

func (b *pgBackend) terminate() bool { return pgOption(b.cs, "terminate") }

// identities are what s holds for each login; each checked as one of the
// set's login roles (checkLogin) when check.
func (b *pgBackend) identities(s engine.Secrets, which string, check bool) ([]pgIdentity, error) {
	var out []pgIdentity
	for _, l := range b.logins() {
		user, pw := s[l.userKey()], s[l.passwordKey()]
		if user == "" || pw == "" {
			return nil, fmt.Errorf("the %s secrets lack a %s or a %s", which, l.userKey(), l.passwordKey())
		}
		out = append(out, pgIdentity{l, user, pw})
	}
	if check {
		for _, id := range out {
			if err := b.checkLogin(id.pgLogin, id.user); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (b *pgBackend) checkLogin(l pgLogin, user string) error {
	if _, ok := pgGenerationOf(l.base, user); ok || l.adopted(user) {
		return nil
	}
	return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: fmt.Sprintf(
		"the source Secret names role %q under %s, which is not one of this set's login roles (%s_g<N>), so rekey changes nothing: restore the source Secret, or delete it to provision afresh", user, l.userKey(), l.base)}
}

func pgSecretsOf(ids []pgIdentity) engine.Secrets {
	s := engine.Secrets{}
	for _, id := range ids {
		s[id.userKey()], s[id.passwordKey()] = id.user, id.pw
	}
	return s
}
