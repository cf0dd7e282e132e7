package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// server is one instance with an admin connection.
type server struct {
	host string
	conn *pgx.Conn
}

// topology is every instance, the primary found by asking each.
type topology struct {
	primary  server
	replicas []server
}

func (t *topology) close(ctx context.Context) {
	for _, s := range append([]server{t.primary}, t.replicas...) {
		if s.conn != nil {
			_ = s.conn.Close(ctx)
		}
	}
}

func (t *topology) all() []server { return append([]server{t.primary}, t.replicas...) }

// connect opens a session as user on host (host:port) to database db.
func (b *Backend) connect(ctx context.Context, hostPort, user, password, db string) (*pgx.Conn, error) {
	addr := hostPort
	if b.AddressMap != nil {
		addr = b.AddressMap(hostPort)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("%s: bad port", hostPort)
	}
	// Built from nothing: no PG* variable, service or password file of
	// the manager's environment takes part.
	cfg, err := pgx.ParseConfig("host=invalid.invalid")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Database = host, uint16(p), user, password, db
	cfg.TLSConfig, cfg.Fallbacks = b.tlsConfig(host), nil
	cfg.ConnectTimeout = b.timeout()
	cfg.RuntimeParams = map[string]string{"application_name": "rekey"}
	return pgx.ConnectConfig(ctx, cfg)
}

func (b *Backend) timeout() time.Duration {
	if b.Timeout <= 0 {
		return DefaultTimeout
	}
	return b.Timeout
}

// topology connects as the admin to every instance and reads which is the
// primary: every instance must answer (the health gate), and exactly one
// may be writable.
func (b *Backend) topology(ctx context.Context) (_ *topology, err error) {
	t := &topology{}
	defer func() {
		if err != nil {
			t.close(ctx)
		}
	}()
	var primaries []string
	for _, h := range b.hosts {
		c, err := b.connect(ctx, h, b.adminUser, b.adminPassword, b.database)
		if err != nil {
			return nil, b.fail(h, "connect as the admin", err)
		}
		var standby bool
		if err := c.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil {
			_ = c.Close(ctx)
			return nil, b.fail(h, "read pg_is_in_recovery()", err)
		}
		s := server{host: h, conn: c}
		if standby {
			t.replicas = append(t.replicas, s)
			continue
		}
		primaries = append(primaries, h)
		if t.primary.conn != nil {
			_ = c.Close(ctx)
			continue
		}
		t.primary = s
	}
	switch len(primaries) {
	case 1:
		return t, nil
	case 0:
		return nil, &engine.Refusal{Reason: string(reason.ClusterUnhealthy), Message: fmt.Sprintf(
			"none of %v is a primary (every one is in recovery), so nothing was changed: promote one, or add the primary to spec.postgres.hosts", b.hosts)}
	}
	return nil, &engine.Refusal{Reason: string(reason.ClusterUnhealthy), Message: fmt.Sprintf(
		"%v are all primaries (not in recovery), so rekey cannot tell where a role change would replicate from and changed nothing: list the instances of one cluster in spec.postgres.hosts, or end the split", primaries)}
}

// fail turns a driver error into what the engine acts on: a server that
// cannot be reached stops the phase until it answers; a refused admin is
// the user's to fix.
func (b *Backend) fail(host, what string, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		// PostgreSQL locks no role after failed logins, so a retry cannot
		// make things worse; still, it cannot succeed either, and the
		// controller holds the set until a person changes it.
		switch pg.Code {
		case "28P01":
			return &engine.Refusal{Reason: string(reason.AuthenticationFailed), Message: fmt.Sprintf(
				"%s: %s: the server refused the password of the admin role %q (%s): the admin Secret holds another password, or the role's password expired (VALID UNTIL; ALTER ROLE %s VALID UNTIL 'infinity', or a later date). Nothing was changed", host, what, b.adminUser, sqlState(pg), ident(b.adminUser))}
		case "28000":
			return &engine.Refusal{Reason: string(reason.AuthenticationFailed), Message: fmt.Sprintf(
				"%s: %s: the server does not let the admin role %q log in (%s): the role is disabled (NOLOGIN; ALTER ROLE %s LOGIN), or pg_hba.conf has no line that lets it in from rekey's address. Nothing was changed", host, what, b.adminUser, sqlState(pg), ident(b.adminUser))}
		}
		return scrub(fmt.Sprintf("%s: %s: ", host, what), err)
	}
	if pgconn.Timeout(err) || isNetError(err) {
		return &engine.UnreachableError{Instance: host, Err: scrub(what+": ", err)}
	}
	return scrub(fmt.Sprintf("%s: %s: ", host, what), err)
}

func isNetError(err error) bool {
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.As(err, &ne) || (errors.As(err, &ce) && !errors.As(err, new(*pgconn.PgError)))
}

// logsIn reports whether user logs in to host with password. It is false
// only when the server says the password is wrong (or the role cannot log
// in); any other failure is an error, and callers then change nothing.
func (b *Backend) logsIn(ctx context.Context, host, user, password string) (bool, error) {
	c, err := b.connect(ctx, host, user, password, b.database)
	if err == nil {
		return true, c.Close(ctx)
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "28P01" {
		return false, nil
	}
	if errors.As(err, &pg) && pg.Code == "28000" {
		// "role is not permitted to log in", or no pg_hba.conf line.
		return false, &scrubbedError{fmt.Sprintf("%s: log in as %s: %s: allow the login roles <base>_g<N> in pg_hba.conf", host, user, sqlState(pg)), err}
	}
	return false, b.fail(host, "log in as "+user, err)
}
