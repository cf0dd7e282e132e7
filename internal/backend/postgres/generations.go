package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// generations lists this set's login roles of base (named <base>_g<N>,
// carrying its mark).
func (b *Backend) generations(ctx context.Context, s server, base string) ([]string, error) {
	rows, err := s.conn.Query(ctx, "SELECT rolname, COALESCE(shobj_description(oid, 'pg_authid'), '') FROM pg_roles WHERE starts_with(rolname, $1) AND starts_with(shobj_description(oid, 'pg_authid'), $2) ORDER BY rolname",
		base+"_g", ownerMark(b.owner))
	if err != nil {
		return nil, b.fail(s.host, "list the login roles", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Comment string }])
	if err != nil {
		return nil, b.fail(s.host, "list the login roles", err)
	}
	var out []string
	for _, r := range found {
		if _, ok := generationOf(base, r.Name); ok && b.owned(role{exists: true, mark: r.Comment}) {
			out = append(out, r.Name)
		}
	}
	return out, nil
}

// removeGenerations drops this set's roles of login l other than keep:
// left by an interrupted rotation, nobody was ever given them.
func (b *Backend) removeGenerations(ctx context.Context, t *topology, l login, why reason.Reason, keep ...string) error {
	gens, err := b.generations(ctx, t.primary, l.base)
	if err != nil {
		return err
	}
	for _, g := range gens {
		if contains(keep, g) {
			continue
		}
		if err := b.dropLogin(ctx, t, l.group, g, why); err != nil {
			return err
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// otherGeneration refuses when a login role of this set's base other than
// the current one exists. No rotation leaves one once it completes or
// rolls back, so it is one the status does not account for: a status and
// source Secret restored from a backup taken before a rotation, while
// consumers may log in as that rotation's role. Dropping it (a rotation's
// Apply, a deletion's wind-down) or giving its name a new password (the
// next rotation makes that generation again) would lock them out. The
// refusal is the one a MySQL user's unaccounted second password gets, and
// what holds a deleted set the same way: recover restarts the consumers
// onto the current logins, then resets the server to them.
func (b *Backend) otherGeneration(ctx context.Context, t *topology, id identity, then string) error {
	gens, err := b.generations(ctx, t.primary, id.base)
	if err != nil {
		return err
	}
	for _, g := range gens {
		if g != id.user {
			return &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: fmt.Sprintf(
				"role %s already has a login on %s beside the current login %s: a generation of this set that the status does not account for (was the status or the source Secret restored from a backup?), which consumers may log in as, so nothing was changed: reset the server to the source Secret (kubectl rekey recover does this, once the consumers run the current logins)%s", g, t.primary.host, id.user, then)}
		}
	}
	return nil
}
