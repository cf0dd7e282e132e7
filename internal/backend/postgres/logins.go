package postgres

import (
	"errors"
	"fmt"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// login is one identity a set rotates: its roles are <base>_g<N>, members
// of group, and the source Secret holds it under its own two keys.
type login struct {
	base, group string
	// prefix goes before every key the login has in the source and
	// distributed Secrets: "" for spec.postgres.login (the keys a
	// single-login set always had), "<base>." for each of
	// spec.postgres.logins, so that no two logins share a key.
	prefix string
	// adopt is the existing role that is this login's generation 1
	// (spec.postgres.adopt, or the item's adopt), named in messages by
	// adoptField.
	adopt, adoptField string
}

// adopted: user is the role this login adopts.
func (l login) adopted(user string) bool { return l.adopt != "" && user == l.adopt }

func (l login) userKey() string     { return l.prefix + KeyUsername }
func (l login) passwordKey() string { return l.prefix + KeyPassword }

// Prefix is what goes before every key login base has in the source and
// distributed Secrets of spec: nothing for spec.postgres.login, the
// base and a dot for each of spec.postgres.logins.
func Prefix(spec *v1.PostgresSpec, base string) string {
	if len(spec.Logins) == 0 {
		return ""
	}
	return base + "."
}

// loginsOf are the spec's logins, each checked, and none named so that
// one could take another's roles for its own.
func loginsOf(spec *v1.PostgresSpec) ([]login, error) {
	specs := spec.RotatingLogins()
	if len(specs) > 16 {
		return nil, fmt.Errorf("postgres.logins: %d logins, at most 16: rotate the others in a set of their own", len(specs))
	}
	var out []login
	for _, s := range specs {
		if err := checkBase(s.Base); err != nil {
			return nil, err
		}
		for _, o := range specs {
			if err := checkGroup(s.Group, o.Base); err != nil {
				return nil, err
			}
		}
		for _, o := range out {
			if o.base == s.Base {
				return nil, fmt.Errorf("postgres.logins: base %q is listed twice: list each login once", s.Base)
			}
		}
		out = append(out, login{base: s.Base, group: s.Group, prefix: Prefix(spec, s.Base)})
	}
	if a := spec.Adopt; a != nil {
		if len(spec.Logins) > 0 {
			return nil, errors.New("postgres.adopt goes with postgres.login: with postgres.logins, move it into the item of the login whose role it is")
		}
		out[0].adopt, out[0].adoptField = a.Role, "spec.postgres.adopt"
	}
	for i, s := range spec.Logins {
		if s.Adopt != nil {
			out[i].adopt, out[i].adoptField = s.Adopt.Role, fmt.Sprintf("spec.postgres.logins[%d].adopt", i)
		}
	}
	if spec.Login.Adopt != nil {
		return nil, errors.New("postgres.login.adopt: with postgres.login, the role to adopt goes in postgres.adopt")
	}
	return out, checkAdopted(out)
}

// checkAdopted refuses an adopted role rekey could confuse with a role
// it must keep (a group) or one it makes and drops itself (a generation),
// or that two logins would share.
func checkAdopted(logins []login) error {
	for i, l := range logins {
		if l.adopt == "" {
			continue
		}
		for j, o := range logins {
			if l.adopt == o.group {
				return fmt.Errorf("%s.role %q is a group, which rekey never drops: name the login role applications use today", l.adoptField, l.adopt)
			}
			if _, own := generationOf(o.base, l.adopt); own {
				return fmt.Errorf("%s.role %q is named like one of this set's own generations: name the role applications log in as today", l.adoptField, l.adopt)
			}
			if j != i && o.adopt == l.adopt {
				return fmt.Errorf("%s.role %q is adopted by another login too: each login adopts a role of its own", l.adoptField, l.adopt)
			}
		}
	}
	return nil
}

// identity is one login's role and password, as a set of secrets holds
// them.
type identity struct {
	login
	user, password string
}

// identities are what s holds for each login, in the spec's order.
func (b *Backend) identities(s engine.Secrets, which string) ([]identity, error) {
	var out []identity
	for _, l := range b.logins {
		user, password := s[l.userKey()], s[l.passwordKey()]
		if user == "" || password == "" {
			return nil, fmt.Errorf("the %s secrets lack a %s or a %s", which, l.userKey(), l.passwordKey())
		}
		out = append(out, identity{l, user, password})
	}
	return out, nil
}

// secretsOf are ids as a set of secrets.
func secretsOf(ids []identity) engine.Secrets {
	s := engine.Secrets{}
	for _, id := range ids {
		s[id.userKey()], s[id.passwordKey()] = id.user, id.password
	}
	return s
}
