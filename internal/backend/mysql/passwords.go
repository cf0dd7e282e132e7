package mysql

import (
	"fmt"
	"slices"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/moco"
	"rekey.io/rekey/internal/reason"
)

// DefaultPasswordLength is the length of every generated MySQL password a
// spec does not lengthen: the strength floor (about 190 bits), which is
// also the most a replication password may be, so a user granted
// replication later still works as a replica's source user.
const DefaultPasswordLength = engine.DefaultPasswordLength

// MaxReplicationPasswordLength is the longest SOURCE_PASSWORD MySQL takes
// in CHANGE REPLICATION SOURCE TO (error 3056 above it, verified on
// 9.7.4). MOCO issues that statement with moco-repl's password on every
// replica start and switchover.
const MaxReplicationPasswordLength = 32

// mayReplicate reports whether a replica may use the user as its source
// user: MOCO's replication user, or a user granted REPLICATION SLAVE
// (directly, or with ALL PRIVILEGES on *.*, which includes it).
func mayReplicate(name string, grants []v1.MySQLGrant) bool {
	if name == moco.ReplicationUser {
		return true
	}
	for _, g := range grants {
		if slices.Contains(g.Privileges, "REPLICATION SLAVE") || g.Object == "*.*" && slices.Contains(g.Privileges, "ALL PRIVILEGES") {
			return true
		}
	}
	return false
}

// passwordLength decides the length of a user's generated passwords from
// the spec's override (0 when unset) and whether a replica may use the
// user. Admission refuses the same inputs; this is the second line.
func passwordLength(override int, replication bool) (int, error) {
	n := override
	if n == 0 {
		n = DefaultPasswordLength
	}
	switch {
	case n < engine.MinPasswordLength || n > engine.MaxPasswordLength:
		return 0, fmt.Errorf("passwordLength %d: use %d (%d bits) to %d", n, engine.MinPasswordLength, engine.MinPasswordBits, engine.MaxPasswordLength)
	case replication && n > MaxReplicationPasswordLength:
		return 0, fmt.Errorf("passwordLength %d: a replica may use this user as its source user, and MySQL refuses a replication password longer than %d characters: set passwordLength to %d or remove it", n, MaxReplicationPasswordLength, MaxReplicationPasswordLength)
	}
	return n, nil
}

// passwordLengths maps each user's source Secret key to the length of its
// generated passwords.
func passwordLengths(users []User) map[string]int {
	out := make(map[string]int, len(users))
	for _, u := range users {
		out[u.Key] = u.PasswordLength
	}
	return out
}

// tooLongForReplication names each user whose next password would be
// longer than MySQL takes for replication although a replica may use it:
// a replica logs in to its source as it (the consumer that would break,
// whatever the grants say: REPLICATION SLAVE through a role is not in
// mysql.user), or an instance grants it REPLICATION SLAVE outside what the
// spec lists (an adopted user, a grant added by hand), which admission
// could not see. granted maps a user (name@host) to the instances that
// grant it REPLICATION SLAVE.
func tooLongForReplication(users []User, granted map[string][]string, obs []observation) []string {
	var out []string
	for _, u := range users {
		if u.PasswordLength <= MaxReplicationPasswordLength {
			continue
		}
		var why []string
		for _, o := range obs {
			if slices.ContainsFunc(o.Channels, func(c channel) bool { return c.SourceUser == u.Name }) {
				why = append(why, o.Name+" replicates as it")
			}
		}
		if on := slices.Sorted(slices.Values(granted[u.String()])); len(on) > 0 {
			why = append(why, "granted REPLICATION SLAVE on "+strings.Join(on, ", "))
		}
		if len(why) > 0 {
			out = append(out, fmt.Sprintf("%s (passwordLength %d): %s", u, u.PasswordLength, strings.Join(why, "; ")))
		}
	}
	return out
}

// replicationRefusal refuses a rotation whose new password a replica
// could not use; nil when there is nothing to refuse.
func replicationRefusal(found []string) *engine.Refusal {
	if len(found) == 0 {
		return nil
	}
	return &engine.Refusal{Reason: string(reason.RotateRefused), Message: fmt.Sprintf(
		"a replica may use these users as its source user, and MySQL refuses a replication password longer than %d characters, so the rotation did not start: %s. Set passwordLength to %d or remove it (the default, %d characters, is %d bits), or revoke REPLICATION SLAVE from a user no replica uses",
		MaxReplicationPasswordLength, strings.Join(found, ". "), MaxReplicationPasswordLength, DefaultPasswordLength, engine.MinPasswordBits)}
}

// merge is a and b in one map, b's keys suffixed as pending ones: the
// secrets a session redacts.
func merge(a, b engine.Secrets) engine.Secrets {
	out := engine.Secrets{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k+engine.PendingSuffix] = v
	}
	return out
}

func values(s engine.Secrets) []string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		out = append(out, v)
	}
	return out
}
