package ceph

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"rekey.io/rekey/internal/leader"
)

// Fencing a stale manager at the mon, as far as Ceph allows. A leader
// that stalls past its Lease wakes up with what it read before: its
// `auth rotate` would kill the key the new leader just distributed, its
// `auth rm` a generation consumers still use. The mon has no lock a
// client can hold across commands and config-key has no compare-and-set,
// so the tightest bound is a leadership term the cluster keeps, read
// right before every command that changes the cluster: config-key
// rekey/term/<set UID> holds the highest term that changed the set's
// entities. A manager whose term is lower changes nothing; one whose term
// is higher records it first. What remains is the time from that read to
// the command reaching the mon — one start of the ceph CLI: a manager
// paused inside it can still land one command after a later leader
// recorded its term; its next command is refused.

// termPrefix begins the config-key holding a set's term.
const termPrefix = "rekey/term/"

func (b *Backend) termKey() string { return termPrefix + b.Owner.UID }

// isTermWrite: words record the term (and must not check it again).
func isTermWrite(words []string) bool {
	return len(words) >= 3 && words[0] == "config-key" && strings.HasPrefix(words[2], termPrefix)
}

// checkTerm reads the set's recorded term as the entity about to run a
// changing command (the admin, or the rotator while the admin's key
// rotates), refuses if it is higher than this manager's and records this
// manager's when it is lower.
func (s *session) checkTerm(ctx context.Context, entity, keyring, key string) error {
	b := s.b
	out, err := s.exec(ctx, entity, keyring, key, []string{"config-key", "get", b.termKey()})
	var newest int64
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return fmt.Errorf("read the leadership term recorded in the cluster: %w", err)
	default:
		if newest, err = strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err != nil {
			return fmt.Errorf("config-key %s holds no leadership term (rekey writes it; remove the key)", b.termKey())
		}
	}
	if refused := termRefusal(b.Term, newest); refused != nil {
		return refused
	}
	if newest == b.Term {
		return nil
	}
	if _, err := s.exec(ctx, entity, keyring, key, []string{"config-key", "set", b.termKey(), strconv.FormatInt(b.Term, 10)}); err != nil {
		return fmt.Errorf("record the leadership term in the cluster: %w", err)
	}
	return nil
}

// termRefusal is nil when term may change the set's entities, whose
// highest recorded term is newest.
func termRefusal(term, newest int64) error {
	if newest <= term {
		return nil
	}
	return fmt.Errorf("%w: a rekey manager elected later (term %d) has already changed this set's entities; this one (term %d) changes nothing",
		leader.ErrNotLeader, newest, term)
}
