package mysql

import (
	"fmt"
	"slices"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/moco"
)

// Two sets whose instances are the same mysqld servers share every account
// on them, and MySQL keeps one secondary password per account: the second
// set's rotation would retain the first set's password as the secondary
// and its discard drop it, locking out the first set's consumers; and a
// set rotating the account another set connects as leaves that set unable
// to log in anywhere. The checks below refuse the second set from its spec
// alone, before it runs a statement. Whether two sets share instances is
// the caller's to tell (the lock keys: the same host:port, StatefulSet or
// MOCO cluster).
//
// Accounts are compared by user name, whatever their hosts: MySQL
// authenticates a client as the account with the most specific host that
// matches it, so a set creating app@'10.%' next to another set's app@'%'
// takes over the logins of that set's consumers from 10.*, and a set
// rotating root@'10.%' may be rotating the account another set's admin
// connects as.

// Clash tells whether spec b would rotate an account spec a rotates, two
// specs of sets on the same instances, and describes the first such user
// of b with the field that lists it ("" when none). A spec whose users do
// not resolve clashes with nothing here: it is refused for that on its own.
func Clash(a, b *v1.MySQLSpec) string {
	ua, ub := rotatedUsers(a), rotatedUsers(b)
	for _, u := range ub {
		o, ok := named(ua, u.Name)
		switch {
		case !ok:
		case u.Host == o.Host:
			return fmt.Sprintf("it rotates user %s too: MySQL keeps one secondary password per account, so one set's rotation would retain the other's password and its discard drop it, refusing that set's consumers. %s", u, removal(b, u))
		default:
			return fmt.Sprintf("it rotates user %s, and this set user %s: MySQL logs a client in as whichever account of the name has the most specific host matching it, so one set would take over logins of the other's consumers. %s", o, u, removal(b, u))
		}
	}
	return ""
}

// AdminClash tells whether spec b and spec a, on the same instances, would
// break each other's admin: one rotates the user the other connects as
// (spec.mysql.admin.user), which that other set does not rotate itself, so
// the other's admin password stops working at the first rotation. It
// says, for b, what to change ("" when nothing clashes). Two sets that
// both rotate one admin clash as users (Clash).
func AdminClash(a, b *v1.MySQLSpec) string {
	if a == nil || b == nil {
		return ""
	}
	ua, ub := rotatedUsers(a), rotatedUsers(b)
	admin := effective(a).Admin.User
	if u, ok := named(ub, admin); ok {
		if _, own := named(ua, admin); !own {
			return fmt.Sprintf("it connects as %s (its spec.mysql.admin.user), which this set rotates as user %s: that set could no longer log in at this set's first rotation. %s", admin, u, removal(b, u))
		}
	}
	admin = effective(b).Admin.User
	if u, ok := named(ua, admin); ok {
		if _, own := named(ub, admin); !own {
			return fmt.Sprintf("it rotates user %s, and this set connects as %s (spec.mysql.admin.user): this set could no longer log in after that set's first rotation. Connect as another user in spec.mysql.admin", u, admin)
		}
	}
	return ""
}

// rotatedUsers are the accounts s rotates, host in lower case (MySQL
// compares host names without case), nil when it has none or they do not
// resolve.
func rotatedUsers(s *v1.MySQLSpec) []User {
	if s == nil {
		return nil
	}
	users, err := ResolveUsers(effective(s))
	if err != nil {
		return nil
	}
	out := make([]User, len(users))
	for i, u := range users {
		out[i] = User{Name: u.Name, Host: strings.ToLower(u.Host)}
	}
	return out
}

// effective is the spec a set stands for: a moco set's is implied by its
// MySQLCluster (MOCO's 8 users, moco-admin as the admin).
func effective(s *v1.MySQLSpec) *v1.MySQLSpec {
	if s.MOCO != nil {
		return moco.DerivedSpec(s)
	}
	return s
}

// named is the first of users called name (user names are case-sensitive
// in MySQL).
func named(users []User, name string) (User, bool) {
	for _, u := range users {
		if u.Name == name {
			return u, true
		}
	}
	return User{}, false
}

// removal says what to change in spec s so that it no longer rotates u.
func removal(s *v1.MySQLSpec, u User) string {
	switch {
	case s.MOCO != nil:
		return "A MySQLCluster's system users rotate in one set: delete one of the two sets"
	case slices.ContainsFunc(s.Users, func(x v1.MySQLUser) bool { return x.Name == u.Name }):
		return fmt.Sprintf("Remove %s from spec.mysql.users (or delete one of the two sets)", u)
	}
	return fmt.Sprintf("The moco preset (spec.mysql.preset) rotates %s: one cluster's MOCO users rotate in one set, so delete one of the two sets", u)
}
