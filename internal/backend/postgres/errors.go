package postgres

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"regexp"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"rekey.io/rekey/internal/engine"
)

// Conditions and Events are readable by the set's tenant, and a set can
// point rekey at any host:port the manager reaches: whatever answers there
// must not come back to the tenant. So an error is told in rekey's words,
// with at most a SQLSTATE — never the message a server sent.

// sqlStates are the SQLSTATEs rekey explains; any other is reported by its
// code alone.
var sqlStates = map[string]string{
	"28P01": "password authentication failed",
	"28000": "the server does not allow this login (pg_hba.conf, or a role that may not log in)",
	"42501": "a privilege the statement needs is missing",
	"42704": "an object the statement names does not exist",
	"42710": "the role exists already",
	"2BP01": "objects still depend on the role",
	"3D000": "the database does not exist",
	"25006": "the server is read-only (a replica)",
	"53300": "too many connections",
	"57P01": "the server is shutting down",
	"57P03": "the server is starting up or shutting down",
	"0A000": "the server does not support the statement",
}

// sqlState is rekey's text for a server error.
func sqlState(pg *pgconn.PgError) string {
	code := "unknown"
	if validCode.MatchString(pg.Code) {
		code = pg.Code
	}
	if text, ok := sqlStates[code]; ok {
		return fmt.Sprintf("PostgreSQL error %s (%s)", code, text)
	}
	return "PostgreSQL error " + code
}

var validCode = regexp.MustCompile(`^[0-9A-Z]{5}$`)

// netText is rekey's text for a failure to talk to the server at all.
func netText(err error) string {
	var (
		dns     *net.DNSError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		verify  *tls.CertificateVerificationError
	)
	switch {
	case pgconn.Timeout(err), errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.As(err, &dns):
		return "the host name could not be resolved"
	case errors.As(err, &unknown), errors.As(err, &verify):
		return "the server's TLS certificate is not signed by the CA rekey trusts (spec.postgres.tlsCASecretRef)"
	case errors.As(err, &host):
		return "the server's TLS certificate is not for this host"
	case errors.As(err, &invalid):
		return "the server's TLS certificate is not valid"
	}
	return "an answer rekey does not expect of PostgreSQL"
}

// scrubbedError carries rekey's words for err and err itself, so that
// rekey's own decisions (errors.As) still see what the driver returned.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrub is err in rekey's words, prefixed by what rekey was doing.
func scrub(prefix string, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return &scrubbedError{prefix + sqlState(pg), err}
	}
	return &scrubbedError{prefix + netText(err), err}
}

// safe is the last check on an error leaving the backend for a condition:
// refusals, unreachable instances and scrubbed errors carry rekey's text
// already; anything else is told in rekey's words.
func safe(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := engine.AsRefusal(err); ok {
		return err
	}
	if _, ok := engine.AsUnreachable(err); ok {
		return err
	}
	var f *fencedError
	if errors.As(err, &f) {
		return err // rekey's own words, and the controller must recognise it
	}
	var s *scrubbedError
	if errors.As(err, &s) {
		return err
	}
	if !foreign(err) {
		return err
	}
	return scrub("", err)
}

// foreign: err carries text that came from outside rekey (the driver, the
// network, a server).
func foreign(err error) bool {
	var pg *pgconn.PgError
	var ce *pgconn.ConnectError
	var ne net.Error
	var op *net.OpError
	return errors.As(err, &pg) || errors.As(err, &ce) || errors.As(err, &ne) || errors.As(err, &op) || pgconn.Timeout(err)
}

// detailLine is the only server text rekey repeats, in a refusal to drop a
// role: the objects that depend on it, which a person must move. Bounded,
// and only characters an object description has.
var detailChars = regexp.MustCompile(`[^A-Za-z0-9_ .,;:()"$\-]`)
