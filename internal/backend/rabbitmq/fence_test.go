package rabbitmq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"rekey.io/rekey/internal/leader"
)

func TestTermRefusal(t *testing.T) {
	for _, c := range []struct {
		term, newest int64
		refused      bool
	}{{5, 0, false}, {5, 5, false}, {5, 4, false}, {5, 6, true}} {
		err := termRefusal(c.term, c.newest)
		if (err != nil) != c.refused || (err != nil && !errors.Is(err, leader.ErrNotLeader)) {
			t.Errorf("termRefusal(%d, %d) = %v, refused want %v", c.term, c.newest, err, c.refused)
		}
	}
}

// testTermFenced: the leadership term is recorded on the broker (a global
// parameter) before the first changing request of a term, and a manager
// whose term is older than the recorded one (a leader that stalled past
// its Lease and woke up after the next one acted) sends no changing
// request — no new user, no retired or reset one, no deletion — while the
// current and a later leader proceed.
func testTermFenced(t *testing.T, br *broker) {
	ctx := context.Background()
	const owner = "5d2c1b0a-9e8f-4a7b-b6c5-d4e3f2a1b0c9"
	spec := br.spec("termed")
	at := func(term int64) *Backend {
		b := br.backendOf(t, spec, owner)
		b.Term = term
		return b
	}
	current, stale, later := at(200), at(100), at(300)
	cur, next := gen(t, current, 1), gen(t, current, 2)
	if _, err := current.Provision(ctx, cur); err != nil {
		t.Fatal(err)
	}
	br.wantTerm(t, current, "200")
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, leader.ErrNotLeader) || !strings.Contains(err.Error(), "elected later (term 200)") {
			t.Fatalf("%s by a manager with an older term: %v, want the term's refusal", what, err)
		}
	}
	_, err := stale.Apply(ctx, cur, next, 2)
	refused("rotate", err)
	if br.exists(t, "termed-g2") {
		t.Fatal("the refused rotate created termed-g2")
	}
	if _, err := current.Apply(ctx, cur, next, 2); err != nil {
		t.Fatalf("rotate by the current leader: %v", err)
	}
	refused("discard", stale.Retire(ctx, cur, next))
	refused("reset", stale.Reset(ctx, cur))
	refused("delete", stale.Deprovision(ctx, next))
	for _, s := range []map[string]string{cur, next} {
		if err := current.Verify(ctx, s); err != nil {
			t.Fatalf("%s no longer logs in after the stale manager's attempts: %v", s[KeyUsername], err)
		}
	}
	br.wantTerm(t, current, "200")

	started := time.Now()
	if err := later.Retire(ctx, cur, next); err != nil {
		t.Fatalf("discard by a later leader: %v", err)
	}
	t.Logf("a discard with the term checked before each changing request took %s", time.Since(started).Round(time.Millisecond))
	if br.exists(t, "termed-g1") {
		t.Fatal("the later leader's discard left termed-g1")
	}
	br.wantTerm(t, current, "300")
	if err := current.Deprovision(ctx, next); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("deletion by the leader before the later one: %v, want the term's refusal", err)
	}
	if err := current.Verify(ctx, next); err != nil {
		t.Fatal(err)
	}
	if err := later.Release(ctx, next); err != nil {
		t.Fatal(err)
	}
	if _, err := br.admin.GetGlobalParameter(later.termName()); !isNotFound(err) {
		t.Fatalf("the set's term is left after its deletion: %v", err)
	}
}

func (br *broker) wantTerm(t *testing.T, b *Backend, want string) {
	t.Helper()
	p, err := br.admin.GetGlobalParameter(b.termName())
	if err != nil {
		t.Fatalf("read the term's global parameter: %v", err)
	}
	if got, _ := p.Value.(string); got != want {
		t.Fatalf("the recorded term is %v, want %s", p.Value, want)
	}
}
