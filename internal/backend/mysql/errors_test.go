package mysql

import (
	"context"
	"crypto/x509"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	driver "github.com/go-sql-driver/mysql"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

const canary = "CANARY-7f3a-internal-secret"

// TestExplain: every failure is told by its kind in rekey's words, and
// nothing a server sent (canary) survives, whatever it wrapped it in.
func TestExplain(t *testing.T) {
	mysqlErr := func(n uint16) error {
		return &driver.MySQLError{Number: n, Message: canary + " for user 'x'@'10.1.2.3'"}
	}
	for _, tc := range []struct {
		name string
		err  error
		kind failKind
		says string
	}{
		{"access denied", mysqlErr(1045), failAuth, "MySQL error 1045 (access denied"},
		{"auth_socket account", mysqlErr(1698), failAuth, "MySQL error 1698"},
		{"locked after failed logins", mysqlErr(3955), failLocked, "MySQL error 3955 (the account is locked after too many failed logins"},
		{"locked by ACCOUNT LOCK", mysqlErr(3118), failLocked, "MySQL error 3118 (the account is locked"},
		{"expired password", mysqlErr(1862), failAuth, "has expired"},
		{"host not allowed", mysqlErr(1130), failAuth, "MySQL error 1130"},
		{"missing privilege", mysqlErr(1227), failPermission, "MySQL error 1227 (a privilege the statement needs is missing)"},
		{"missing privilege named", &driver.MySQLError{Number: 1227, Message: "Access denied; you need (at least one of) the SUPER or SYSTEM_VARIABLES_ADMIN privilege(s) for this operation"},
			failPermission, "needs the SUPER or SYSTEM_VARIABLES_ADMIN privilege"},
		{"a forged privilege list", &driver.MySQLError{Number: 1227, Message: "you need the " + canary + " privilege"},
			failPermission, "MySQL error 1227 (a privilege the statement needs is missing)"},
		{"table denied", mysqlErr(1142), failPermission, "MySQL error 1142"},
		{"too many connections", mysqlErr(1040), failUnreachable, "too many connections"},
		{"requires TLS", mysqlErr(3159), failTLS, "only TLS"},
		{"an unknown number", mysqlErr(9999), failOther, "MySQL error 9999"},
		{"deadline", fmt.Errorf("dial: %w", context.DeadlineExceeded), failUnreachable, "no answer in time"},
		{"i/o timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, failUnreachable, "no answer in time"},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, failUnreachable, "connection refused"},
		{"no such host", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "db", Server: "10.96.0.10:53", IsNotFound: true}}, failUnreachable, "host not found"},
		{"closed", driver.ErrInvalidConn, failUnreachable, "the connection was closed"},
		{"eof", io.ErrUnexpectedEOF, failUnreachable, "the connection was closed"},
		{"bad connection", fmt.Errorf("ping: %w", sqldriver.ErrBadConn), failUnreachable, "the connection was closed"},
		{"session killed", mysqlErr(1927), failUnreachable, "MySQL error 1927 (the server ended the session"},
		{"statement killed", mysqlErr(1317), failUnreachable, "MySQL error 1317 (the server interrupted"},
		{"not MySQL", driver.ErrMalformPkt, failOther, "not MySQL's protocol"},
		{"no TLS", driver.ErrNoTLS, failTLS, "does not offer TLS"},
		{"a driver error quoting the server", fmt.Errorf("no pem data found, data: %s", canary), failOther, "did not expect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, text := explain(tc.err)
			if kind != tc.kind || !strings.Contains(text, tc.says) {
				t.Errorf("explain = %d %q, want %d and %q", kind, text, tc.kind, tc.says)
			}
			if strings.Contains(text, canary) || strings.Contains(text, "10.") {
				t.Errorf("explain repeats what the server sent: %q", text)
			}
		})
	}
}

// TestRedactScrubsServerText: rekey's own words around an error survive,
// the server's are replaced, and the error number stays readable.
func TestRedactScrubsServerText(t *testing.T) {
	me := &driver.MySQLError{Number: 1064, Message: "syntax near '" + canary + "'"}
	err := redact(fmt.Errorf("ALTER USER on db-1: %w", me), "Sup3rSecretValue")
	if got := err.Error(); got != "ALTER USER on db-1: MySQL error 1064 (a statement was refused as a syntax error)" {
		t.Fatalf("redact = %q", got)
	}
	if mysqlErrno(err) != 1064 {
		t.Fatal("the error number is lost")
	}
	cert := fmt.Errorf("dial: %w", x509.HostnameError{Certificate: &x509.Certificate{DNSNames: []string{canary + ".internal"}}, Host: "db-1"})
	if got := redact(cert).Error(); strings.Contains(got, canary) || !strings.Contains(got, "does not verify") {
		t.Fatalf("redact = %q", got)
	}
	plain := errors.New("rekey's own words")
	if redact(plain) != plain {
		t.Fatal("an error with nothing foreign was rewritten")
	}
}

// TestAdminLoginMessage: a refused admin login names the account, the
// instance, the error number and where the password comes from, and says
// what a person must do; a locked account says it is locked.
func TestAdminLoginMessage(t *testing.T) {
	ref := &v1.SecretKeyRef{Name: "mysql-admin", Key: "password"}
	lf := func(n uint16) *loginFailure {
		l, ok := asLoginFailure(Instance{Name: "10.0.0.5:3306"}, "ops-admin", &driver.MySQLError{Number: n, Message: canary})
		if !ok {
			t.Fatalf("error %d is not a login failure", n)
		}
		return l
	}
	for _, tc := range []struct {
		name    string
		lf      *loginFailure
		rotated bool
		ref     *v1.SecretKeyRef
		says    []string
	}{
		{"wrong password from a Secret", lf(1045), false, ref,
			[]string{"MySQL error 1045 (access denied", "for user ops-admin at 10.0.0.5:3306", "Secret mysql-admin key password", "put the admin's working password there"}},
		{"locked", lf(3955), false, ref,
			[]string{"MySQL error 3955", "locked", "ops-admin", "Secret mysql-admin key password", "does not clear by itself", "ACCOUNT UNLOCK"}},
		{"rotated admin refused", lf(1045), true, ref,
			[]string{"the password rekey holds", "re-initialised", "recreate the admin account ops-admin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := adminLoginMessage(tc.lf, tc.rotated, tc.ref)
			t.Log(msg)
			for _, w := range tc.says {
				if !strings.Contains(msg, w) {
					t.Errorf("message does not say %q", w)
				}
			}
			if strings.Contains(msg, canary) {
				t.Error("message repeats the server's text")
			}
		})
	}
	if _, ok := asLoginFailure(Instance{}, "x", &driver.MySQLError{Number: 1227}); ok {
		t.Error("a missing privilege is not a refused login")
	}
	b := &Backend{AdminUser: "ops-admin", adminRef: ref}
	rf, ok := engine.AsRefusal(b.adminLoginError(lf(3955)))
	if !ok || rf.Reason != string(reason.AuthenticationFailed) || !reason.NeedsPerson(reason.Reason(rf.Reason)) {
		t.Fatalf("a locked admin is %v, want an AuthenticationFailed refusal", rf)
	}
}
