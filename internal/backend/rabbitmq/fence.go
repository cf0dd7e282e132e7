package rabbitmq

import (
	"context"
	"fmt"
	"strconv"

	"rekey.io/rekey/internal/leader"
)

// Fencing a stale manager at the broker, as far as the management API
// allows. A leader that stalls past its Lease wakes up with what it read
// before: its PUT would give a user a password nobody holds, its DELETE
// take away the user consumers still log in as. The management API has no
// lock and no conditional request, so the tightest bound is a leadership
// term the broker keeps, read right before every request that changes it:
// the global runtime parameter rekey-term-<set UID> holds the highest term
// that changed the set's users (cluster-wide, like the users). A manager
// whose term is lower sends nothing; one whose term is higher records it
// first. What remains is the time from that read to the request reaching
// the broker, one HTTP exchange: a manager paused inside it can still land
// that one request after a later leader recorded its term; its next
// request is refused.

// termPrefix begins the global parameter holding a set's term.
const termPrefix = "rekey-term-"

func (b *Backend) termName() string { return termPrefix + b.owner }

// checkTerm reads the set's recorded term, refuses if it is higher than
// this manager's and records this manager's when it is lower. It runs
// right before a changing request, through a client that asks neither the
// fence nor the term (its own PUT must not).
func (b *Backend) checkTerm(ctx context.Context) error {
	c := b.apiWith(ctx, ctxTransport{ctx: ctx, base: b.transport})
	var newest int64
	p, err := c.GetGlobalParameter(b.termName())
	switch {
	case isNotFound(err):
	case err != nil:
		return b.apiError(ctx, "read the leadership term recorded on the broker", err)
	default:
		s, _ := p.Value.(string)
		if newest, err = strconv.ParseInt(s, 10, 64); err != nil {
			return fmt.Errorf("the global parameter %s on %s holds no leadership term (rekey writes it; remove it)", b.termName(), b.endpoint)
		}
	}
	if refused := termRefusal(b.Term, newest); refused != nil {
		return refused
	}
	if newest == b.Term {
		return nil
	}
	return b.apiError(ctx, "record the leadership term on the broker", drain(c.PutGlobalParameter(b.termName(), strconv.FormatInt(b.Term, 10))))
}

// termRefusal is nil when term may change the set's users, whose highest
// recorded term is newest.
func termRefusal(term, newest int64) error {
	if newest <= term {
		return nil
	}
	return fmt.Errorf("%w: a rekey manager elected later (term %d) has already changed this set's users; this one (term %d) changes nothing",
		leader.ErrNotLeader, newest, term)
}

// forgetTerm removes the set's term once the set let go of the broker:
// nothing of the set is left for a manager to fence.
func (b *Backend) forgetTerm(ctx context.Context) error {
	err := drain(b.api(ctx).DeleteGlobalParameter(b.termName()))
	if isNotFound(err) {
		return nil
	}
	return b.apiError(ctx, "remove the set's leadership term", err)
}
