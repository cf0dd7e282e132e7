package postgres

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rekey.io/rekey/internal/engine"
)

var _ engine.Checker = (*Backend)(nil)

// Check implements engine.Checker: per host, whether it answers, whether
// its certificate verifies as the spec asks, whether the admin logs in,
// its version and role; on the primary, whether the admin may create
// logins and make them members of the group (CREATEROLE, and from
// PostgreSQL 16 the group's ADMIN OPTION), whether the group exists, and
// whether the current login logs in. It only reads.
func (b *Backend) Check(ctx context.Context, in engine.CheckInput) []engine.Finding {
	var fs []engine.Finding
	var primary *pgx.Conn
	primaryHost := ""
	for _, h := range b.hosts {
		c, err := b.connect(ctx, h, b.adminUser, b.adminPassword, b.database)
		fs = append(fs, b.connectFindings(h, err)...)
		if err != nil {
			continue
		}
		defer c.Close(ctx)
		var standby bool
		var version string
		if err := c.QueryRow(ctx, "SELECT pg_is_in_recovery(), current_setting('server_version')").Scan(&standby, &version); err != nil {
			fs = append(fs, engine.Finding{Target: h, Check: "version", Message: "could not be read: " + scrub("", err).Error(), Fix: "see the message"})
			continue
		}
		role := "primary"
		if standby {
			role = "replica (in recovery)"
		} else if primary == nil {
			primary, primaryHost = c, h
		}
		fs = append(fs, engine.Finding{Target: h, Check: "version", OK: true, Message: "PostgreSQL " + versionWords(version) + ", " + role})
	}
	if primary == nil {
		if len(engine.Failed(fs)) == 0 {
			fs = append(fs, engine.Finding{Target: "spec.postgres.hosts", Check: "primary", Deferred: true,
				Message: "none of the hosts is a primary (every one is in recovery)", Fix: "promote one, or add the primary to spec.postgres.hosts"})
		}
		return fs
	}
	fs = append(fs, b.privilegeFindings(ctx, primaryHost, primary)...)
	for _, l := range b.logins {
		fs = append(fs, b.loginFinding(ctx, primaryHost, in, l))
	}
	return fs
}

// connectFindings are the reachable, tls and login findings of a
// connection as the admin that ended with err (nil: logged in).
func (b *Backend) connectFindings(h string, err error) []engine.Finding {
	reached := engine.Finding{Target: h, Check: "reachable", OK: true, Message: "PostgreSQL answers at " + h}
	tlsOK := engine.Finding{Target: h, Check: "tls", OK: true, Message: b.transportWords()}
	login := engine.Finding{Target: h, Check: "login", OK: true, Message: "the admin role " + b.adminUser + " logs in"}
	if err == nil {
		return []engine.Finding{reached, tlsOK, login}
	}
	var (
		pg      *pgconn.PgError
		unknown x509.UnknownAuthorityError
		verify  *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &pg) && (pg.Code == "28P01" || pg.Code == "28000"):
		login.OK, login.Message = false, fmt.Sprintf("the server refuses the admin role %s: %s", b.adminUser, sqlState(pg))
		login.Fix = "put the admin's working password in the admin Secret, and allow its login from the manager in pg_hba.conf"
		return []engine.Finding{reached, tlsOK, login}
	case errors.As(err, &pg) && pg.Code == "3D000":
		login.OK, login.Message = false, fmt.Sprintf("database %s does not exist", b.database)
		login.Fix = "correct spec.postgres.database (default postgres)"
		return []engine.Finding{reached, tlsOK, login}
	case errors.As(err, &pg):
		login.OK, login.Message, login.Fix = false, sqlState(pg), "see the message"
		return []engine.Finding{reached, tlsOK, login}
	case errors.As(err, &unknown), errors.As(err, &verify):
		tlsOK.OK, tlsOK.Message = false, netText(err)+", so rekey sends it no credentials"
		tlsOK.Fix = "put the CA certificate that signed the server's certificate in the Secret spec.postgres.tlsCASecretRef names"
		return []engine.Finding{reached, tlsOK}
	case errors.Is(err, syscall.ECONNREFUSED):
		reached.OK, reached.Deferred = false, true
		reached.Message = fmt.Sprintf("nothing listens on %s (connection refused)", h)
		reached.Fix = "start PostgreSQL there, or correct spec.postgres.hosts"
		return []engine.Finding{reached}
	case pgconn.Timeout(err) || isNetError(err):
		reached.OK, reached.Deferred = false, true
		reached.Message, reached.Fix = fmt.Sprintf("no answer from %s: %s", h, netText(err)), "check that PostgreSQL runs there and that the manager's network reaches it (spec.postgres.hosts)"
		return []engine.Finding{reached}
	}
	reached.OK, reached.Message = false, fmt.Sprintf("%s: %s", h, netText(err))
	reached.Fix = "check that spec.postgres.hosts names the PostgreSQL servers' addresses and ports, and spec.postgres.tls"
	return []engine.Finding{reached}
}

// transportWords says how the servers are verified.
func (b *Backend) transportWords() string {
	switch b.tlsMode {
	case "Disable":
		return "not encrypted: spec.postgres.tls is Disable (rekey warns about it with InsecureTransport)"
	case "Require":
		return "not verified: spec.postgres.tls is Require (rekey warns about it with InsecureTransport)"
	}
	return "TLS, the certificate verified"
}

// versionWords is the number a server_version starts with, never the
// rest of what the server sent.
func versionWords(v string) string {
	if m := versionShape.FindString(v); m != "" {
		return m
	}
	return "(an unreadable version)"
}

// privilegeFindings: on the primary, the admin may create login roles
// (CREATEROLE) and make them members of each login's group, which must
// exist.
func (b *Backend) privilegeFindings(ctx context.Context, h string, c *pgx.Conn) []engine.Finding {
	var super, createRole bool
	var versionNum int
	err := c.QueryRow(ctx, "SELECT rolsuper, rolcreaterole, current_setting('server_version_num')::int FROM pg_roles WHERE rolname = current_user").Scan(&super, &createRole, &versionNum)
	if err != nil {
		return []engine.Finding{{Target: h, Check: "privileges", Message: "could not be read: " + scrub("", err).Error(), Fix: "see the message"}}
	}
	admin := ident(b.adminUser)
	var fs []engine.Finding
	priv := engine.Finding{Target: h, Check: "privileges", OK: true, Message: "the admin role " + b.adminUser + " may create login roles"}
	if !super && !createRole {
		priv.OK = false
		priv.Message = fmt.Sprintf("the admin role %s lacks CREATEROLE: rekey creates a login role per generation and drops the old one", b.adminUser)
		priv.Fix = "ALTER ROLE " + admin + " CREATEROLE; (as a superuser)"
	}
	fs = append(fs, priv)
	seen := map[string]bool{}
	for _, l := range b.logins {
		if !seen[l.group] {
			seen[l.group] = true
			fs = append(fs, b.groupFinding(ctx, h, c, l.group, super, versionNum))
		}
	}
	return fs
}

// groupFinding: group exists, and the admin may grant membership in it.
func (b *Backend) groupFinding(ctx context.Context, h string, c *pgx.Conn, name string, super bool, versionNum int) engine.Finding {
	admin, group := ident(b.adminUser), ident(name)
	var exists, adminOption bool
	err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1), COALESCE((SELECT pg_has_role(current_user, oid, 'MEMBER WITH ADMIN OPTION') FROM pg_roles WHERE rolname = $1), false)",
		name).Scan(&exists, &adminOption)
	if err != nil {
		return engine.Finding{Target: h, Check: "group " + name, Message: "could not be read: " + scrub("", err).Error(), Fix: "see the message"}
	}
	g := engine.Finding{Target: h, Check: "group " + name, OK: true, Message: "exists"}
	switch {
	case !exists:
		g.OK, g.Message = false, "does not exist: every login rekey makes is a member of it and acts as it"
		g.Fix = "CREATE ROLE " + group + " NOLOGIN; then grant it what the application needs, or correct the login's group in spec.postgres"
	case versionNum >= 160000 && !super && !adminOption:
		// From 16 on, CREATEROLE alone no longer lets a role grant
		// membership in a role it did not create.
		g.OK, g.Message = false, fmt.Sprintf("the admin role %s may not grant membership in it (PostgreSQL 16 and later want its ADMIN OPTION)", b.adminUser)
		g.Fix = "GRANT " + group + " TO " + admin + " WITH ADMIN OPTION;"
	}
	return g
}

// loginFinding: the current login logs in with the password rekey holds;
// a failure is Deferred, as the rotation's precheck refuses it itself.
func (b *Backend) loginFinding(ctx context.Context, h string, in engine.CheckInput, l login) engine.Finding {
	user, pw := in.Current[l.userKey()], in.Current[l.passwordKey()]
	f := engine.Finding{Target: h, OK: true}
	switch {
	case (user == "" || pw == "") && l.adopt != "":
		f.Check, f.Message = "login "+l.adopt, "adopted at provisioning, with the password in "+l.adoptField+"'s Secret"
		return f
	case user == "" || pw == "":
		f.Check, f.Message = "login "+loginName(l.base, 1), "missing: rekey creates it"
		return f
	}
	f.Check = "login " + user
	ok, err := b.logsIn(ctx, h, user, pw)
	switch {
	case err != nil:
		f.OK, f.Deferred, f.Message, f.Fix = false, true, "its login could not be checked: "+safe(err).Error(), "see the message"
	case ok:
		f.Message = "logs in with the password rekey holds"
	default:
		f.OK, f.Deferred, f.Message = false, true, "refuses the password rekey holds for it (changed outside rekey?)"
		f.Fix = "set its password back to the source Secret's (kubectl rekey show prints it), or run kubectl rekey recover"
	}
	return f
}
