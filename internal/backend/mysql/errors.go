package mysql

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"syscall"
	"time"

	driver "github.com/go-sql-driver/mysql"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// What a failure of the driver or the network is. Conditions and Events
// are readable by the set's tenant, and a set can point rekey at any
// host:port the manager reaches: whatever answers there (a service only
// the manager's network position reaches, a banner, a server's error
// message naming the manager's address) must not come back to the tenant.
// So a failure is told in rekey's own words, with at most a MySQL error
// number or a kind of network failure — never the text the server sent.
type failKind int

const (
	// failOther: an answer rekey does not expect of MySQL there.
	failOther failKind = iota
	// failAuth: the server refused the credential (wrong, expired, or its
	// account not allowed from rekey's host). A person must act.
	failAuth
	// failLocked: the account is locked (too many failed logins, or
	// ACCOUNT LOCK). A person must act; every retry while locked is one
	// more refused login.
	failLocked
	// failPermission: logged in, but a privilege is missing.
	failPermission
	// failUnreachable: no answer, or a transient refusal (too many
	// connections, shutting down); it clears by itself.
	failUnreachable
	// failTLS: the server requires TLS rekey was told not to use.
	failTLS
)

// mysqlError is rekey's account of one server error number.
type mysqlError struct {
	kind failKind
	text string
}

// mysqlErrors are the error numbers rekey explains. Any other number is
// reported as the bare number: MySQL's own message is never repeated.
var mysqlErrors = map[uint16]mysqlError{
	1040: {failUnreachable, "too many connections"},
	1044: {failPermission, "access denied to a database"},
	1045: {failAuth, "access denied: the password is wrong, or no account of that name may log in from rekey's host"},
	1053: {failUnreachable, "the server is shutting down"},
	1064: {failOther, "a statement was refused as a syntax error"},
	1129: {failOther, "the server blocks rekey's host after too many connection errors (run FLUSH HOSTS on it)"},
	1130: {failAuth, "rekey's host may not connect to the server as any account"},
	1142: {failPermission, "a statement was denied on a table"},
	1143: {failPermission, "a statement was denied on a column"},
	1146: {failOther, "a table does not exist"},
	1203: {failUnreachable, "the account has too many connections (max_user_connections)"},
	1226: {failUnreachable, "the account exceeded a resource limit"},
	1227: {failPermission, "a privilege the statement needs is missing"},
	1251: {failAuth, "the account's authentication plugin is not one rekey's client supports"},
	1290: {failOther, "a server option (such as read_only) prevents the statement"},
	// A session killed (KILL): what a cluster manager does to every
	// connection of a replica it finds writable — MOCO's loop does, while
	// rekey's own DDL runs there — or an administrator did. It is retried.
	1317: {failUnreachable, "the server interrupted the statement (KILL QUERY, or a shutdown)"},
	1927: {failUnreachable, "the server ended the session (KILL: a cluster manager that found a replica writable, or an administrator)"},
	1396: {failOther, "a user statement failed"},
	1698: {failAuth, "access denied: the account authenticates with another plugin (such as auth_socket), not a password"},
	1819: {failOther, "the password does not satisfy the server's password policy (validate_password)"},
	1820: {failAuth, "the account's password has expired and must be reset"},
	1862: {failAuth, "the account's password has expired"},
	3118: {failLocked, "the account is locked (ACCOUNT LOCK)"},
	3878: {failOther, "an empty password cannot be retained: give the account a password first"},
	3159: {failTLS, "the server accepts only TLS connections (require_secure_transport)"},
	3955: {failLocked, "the account is locked after too many failed logins (FAILED_LOGIN_ATTEMPTS, PASSWORD_LOCK_TIME)"},
	4006: {failOther, "the account is the DEFINER of a stored object"},
	4031: {failUnreachable, "the server closed the idle connection"},
}

// privilegeList is the only part of a server message rekey repeats: the
// privileges MySQL names in error 1227 ("you need (at least one of) the
// SUPER or SYSTEM_VARIABLES_ADMIN privilege(s)"). Upper-case privilege
// words only, so nothing else a server sends can pass.
var privilegeList = regexp.MustCompile(`the ((?:[A-Z_]{1,40}(?: [A-Z_]{1,40})?)(?:(?:, | or )[A-Z_]{1,40}(?: [A-Z_]{1,40})?){0,8}) privilege`)

// explainMySQL is rekey's text for a server error, and its kind.
func explainMySQL(me *driver.MySQLError) (failKind, string) {
	known, ok := mysqlErrors[me.Number]
	if !ok {
		return failOther, fmt.Sprintf("MySQL error %d", me.Number)
	}
	text := fmt.Sprintf("MySQL error %d (%s)", me.Number, known.text)
	if me.Number == 1227 {
		if m := privilegeList.FindStringSubmatch(me.Message); m != nil {
			text = fmt.Sprintf("MySQL error %d (the statement needs the %s privilege)", me.Number, m[1])
		}
	}
	return known.kind, text
}

// loginTimeout is a login that got no answer within its deadline (a black
// hole: a host that accepts and never answers). Its text is rekey's own.
type loginTimeout struct {
	after time.Duration
	err   error
}

func (e *loginTimeout) Error() string {
	return fmt.Sprintf("no answer to the login within %s", e.after)
}
func (e *loginTimeout) Unwrap() error { return e.err }

// explain says what err, from the driver or the network, is: its kind and
// rekey's words for it, built only from error numbers, error types and
// rekey's own sentinels — never from text a server sent. TLS verification
// failures are told apart by transport.explainTLS, which knows the spec.
func explain(err error) (failKind, string) {
	var (
		me    *driver.MySQLError
		dns   *net.DNSError
		rhe   tls.RecordHeaderError
		alert tls.AlertError
	)
	var lt *loginTimeout
	switch {
	case errors.As(err, &lt):
		return failUnreachable, lt.Error()
	case errors.As(err, &me):
		return explainMySQL(me)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), isTimeout(err):
		return failUnreachable, "no answer in time"
	case errors.Is(err, context.Canceled):
		return failUnreachable, "cancelled"
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return failUnreachable, "host not found"
		}
		return failUnreachable, "the host name could not be resolved"
	case errors.Is(err, syscall.ECONNREFUSED):
		return failUnreachable, "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return failUnreachable, "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return failUnreachable, "no route to the host"
	case errors.Is(err, driver.ErrNoTLS):
		return failTLS, "the server does not offer TLS"
	case errors.As(err, &rhe):
		return failOther, "the server did not answer the TLS handshake as a TLS server"
	case errors.As(err, &alert):
		return failOther, fmt.Sprintf("the server ended the TLS handshake (alert %d)", uint8(alert))
	case errors.Is(err, driver.ErrOldProtocol), errors.Is(err, driver.ErrMalformPkt),
		errors.Is(err, driver.ErrPktSync), errors.Is(err, driver.ErrPktSyncMul):
		return failOther, "the answer is not MySQL's protocol"
	case errors.Is(err, driver.ErrCleartextPassword), errors.Is(err, driver.ErrNativePassword),
		errors.Is(err, driver.ErrOldPassword), errors.Is(err, driver.ErrUnknownPlugin):
		return failAuth, "the account's authentication plugin is not one rekey's client supports"
	case errors.Is(err, driver.ErrInvalidConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, sql.ErrConnDone), errors.Is(err, net.ErrClosed), errors.Is(err, sqldriver.ErrBadConn):
		return failUnreachable, "the connection was closed"
	case errors.Is(err, sql.ErrNoRows):
		return failOther, "no rows"
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return failUnreachable, "network error (" + op.Op + ")"
	}
	return failOther, "an answer rekey did not expect of a MySQL server"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// certificateError: err is a TLS certificate verification failure.
func certificateError(err error) bool {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		cve      *tls.CertificateVerificationError
	)
	return errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &cve)
}

// foreign reports whether err's own text may hold what a server or the
// network sent (a MySQL message, a certificate's names, an address the
// resolver used); such text is replaced by explain's.
func foreign(err error) bool {
	switch err.(type) {
	case *driver.MySQLError, *net.OpError, *net.DNSError, *tls.CertificateVerificationError,
		x509.UnknownAuthorityError, x509.HostnameError, x509.CertificateInvalidError,
		tls.RecordHeaderError, tls.AlertError:
		return true
	}
	return false
}

// scrubbed is err with the text of each foreign error in its chain
// replaced by rekey's words for it. The chain itself is kept (Unwrap), so
// rekey's own decisions still see the error numbers.
func scrubbed(err error) (string, bool) {
	msg := err.Error()
	changed := false
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, done := e.(*redactedError); done {
			break // scrubbed already: its text is rekey's words
		}
		if !foreign(e) {
			continue
		}
		_, text := explain(e)
		if certificateError(e) {
			text = "the server's TLS certificate does not verify"
		}
		if inner := e.Error(); inner != "" && strings.Contains(msg, inner) {
			msg = strings.ReplaceAll(msg, inner, text)
			changed = true
		}
		break // the first foreign error's text holds those it wraps
	}
	if !changed && hasForeign(err) {
		// Wrapped without its text (or twice): trust nothing of it.
		_, text := explain(err)
		return text, true
	}
	return msg, changed
}

func hasForeign(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, done := e.(*redactedError); done {
			return false
		}
		if foreign(e) {
			return true
		}
	}
	return false
}

// safe is the last check on an error leaving the backend for a condition:
// refusals and unreachable instances carry rekey's text already; anything
// else has what the server sent replaced (redact).
func safe(err error) error {
	if err == nil {
		return nil
	}
	var f *fencedError
	if errors.As(err, &f) {
		return err // rekey's own words, and the controller must recognise it
	}
	if _, ok := engine.AsRefusal(err); ok {
		return err
	}
	if _, ok := engine.AsUnreachable(err); ok {
		return err
	}
	return redact(err)
}

// adminLoginError turns MySQL's refusal of the admin's login into an
// AuthenticationFailed refusal that names the account, the instance, the
// error number and where the password comes from, and says what a person
// must do: waiting cannot help, and each retry with the same password is
// one more failed login, which a server with FAILED_LOGIN_ATTEMPTS counts
// toward (or keeps) the account's lock. Other errors pass unchanged.
func (b *Backend) adminLoginError(err error) error {
	var lf *loginFailure
	if !errors.As(err, &lf) {
		return err
	}
	return &engine.Refusal{Reason: string(reason.AuthenticationFailed), Message: adminLoginMessage(lf, b.AdminKey != "", b.adminRef)}
}

// adminLoginMessage is the text of adminLoginError. rotated: the admin is
// one of the set's users, so its password is rekey's own; ref: the Secret
// key the spec gives for it (nil when none).
func adminLoginMessage(lf *loginFailure, rotated bool, ref *v1.SecretKeyRef) string {
	where := "the password rekey holds for it"
	if ref != nil && !rotated {
		where = fmt.Sprintf("the password in Secret %s key %s (spec.mysql.admin.passwordSecretRef)", ref.Name, ref.Key)
	}
	var fix string
	switch {
	case lf.kind == failLocked:
		fix = fmt.Sprintf("while it is locked MySQL refuses every login as %s, the right password too, so this does not clear by itself: make sure %s is right, then unlock the account on the server (ALTER USER ... ACCOUNT UNLOCK for user %s) or let its PASSWORD_LOCK_TIME pass", lf.user, where, lf.user)
	case rotated:
		fix = fmt.Sprintf("%s was refused: if %s was re-initialised, the cluster's bootstrap must recreate the admin account %s there with that password (kubectl rekey show prints it) before rekey can repair the rotated users; if it returned from a scale-in with a volume older than a rotation, or the password was changed outside rekey, set that account's password there to it (or rebuild the instance)", where, lf.inst, lf.user)
	default:
		fix = fmt.Sprintf("%s is wrong or the account cannot log in from rekey's host: put the admin's working password there (or fix the account on the server)", where)
	}
	return fmt.Sprintf("%s: %s. Nothing was changed", lf.Error(), fix)
}

// fencedError is the fence's refusal, passed through unredacted.
type fencedError struct{ err error }

func (e *fencedError) Error() string { return e.err.Error() }
func (e *fencedError) Unwrap() error { return e.err }

// wrap says which step failed on which instance, in rekey's words: a
// refusal (already rekey's text) passes as it is, a lost connection holds
// the phase as an unreachable instance, a missing privilege is a
// PermissionDenied refusal, and anything else keeps only MySQL's error
// number.
func (s *session) wrap(what string, err error) error {
	if _, ok := engine.AsRefusal(err); ok {
		return err
	}
	kind, text := explain(err)
	if isConnError(err) || kind == failUnreachable {
		return unreachable(s.inst, redact(err, s.secrets...))
	}
	if kind == failPermission {
		return &engine.Refusal{Reason: string(reason.PermissionDenied), Message: fmt.Sprintf(
			"%s on %s: %s for the admin user: grant it that privilege and rekey goes on by itself", what, s.inst.Name, text)}
	}
	return fmt.Errorf("%s on %s: %w", what, s.inst.Name, redact(err, s.secrets...))
}

func isAccessDenied(err error) bool {
	var me *driver.MySQLError
	return errors.As(err, &me) && (me.Number == 1045 || me.Number == 1698)
}

func isConnError(err error) bool {
	var me *driver.MySQLError
	if errors.As(err, &me) {
		return false
	}
	return errors.Is(err, driver.ErrInvalidConn) || errors.Is(err, context.DeadlineExceeded) ||
		strings.Contains(err.Error(), "connect") || strings.Contains(err.Error(), "broken pipe") ||
		strings.Contains(err.Error(), "EOF")
}
