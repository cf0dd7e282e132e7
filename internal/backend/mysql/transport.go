package mysql

import (
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"time"

	driver "github.com/go-sql-driver/mysql"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TLS modes of spec.mysql.tls.
const (
	TLSRequired   = "Required"
	TLSSkipVerify = "SkipVerify"
	TLSPreferred  = "Preferred"
	TLSDisabled   = "Disabled"
)

var (
	// addrPattern is admission's spec.mysql.instances.hosts pattern, which
	// StatefulSet-derived addresses also match. It is re-checked here
	// because addresses reach the driver's dialer and TLS server names,
	// and a StatefulSet's spec.serviceName is not validated by rekey's CRD.
	addrPattern = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?:[0-9]{1,5}$`)
	// serverNamePattern is admission's spec.mysql.tlsServerName pattern.
	serverNamePattern = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$`)
)

// transport is how every connection of one backend is protected. Each
// backend carries its own tls.Config (through the driver's connector), so
// nothing is added to go-sql-driver's process-wide TLS registry and two
// sets never share a CA.
type transport struct {
	mode       string
	roots      *x509.CertPool // nil: the system roots
	serverName string         // "": each instance's own host
}

// newTransport validates the spec's TLS fields; caPEM is the content of
// tlsCASecretRef ("" when unset).
func newTransport(spec *v1.MySQLSpec, caPEM []byte) (transport, error) {
	t := transport{mode: spec.TLSMode(), serverName: spec.TLSServerName}
	switch t.mode {
	case TLSRequired, TLSSkipVerify, TLSPreferred, TLSDisabled:
	default:
		return t, fmt.Errorf("mysql.tls %q: use Required, SkipVerify, Preferred or Disabled", t.mode)
	}
	if t.mode != TLSRequired && (len(caPEM) > 0 || t.serverName != "") {
		return t, fmt.Errorf("mysql.tlsCASecretRef and mysql.tlsServerName only apply to tls: Required, not %s: remove them or set mysql.tls to Required", t.mode)
	}
	if t.serverName != "" && (len(t.serverName) > 253 || !serverNamePattern.MatchString(t.serverName)) {
		return t, fmt.Errorf("mysql.tlsServerName %q: use a DNS name or an IP address", t.serverName)
	}
	if len(caPEM) > 0 {
		t.roots = x509.NewCertPool()
		if !t.roots.AppendCertsFromPEM(caPEM) {
			return t, errors.New("the Secret key named by mysql.tlsCASecretRef holds no PEM certificate: put the CA certificate (-----BEGIN CERTIFICATE-----) that signed the MySQL servers' certificates there")
		}
	}
	return t, nil
}

// insecure says why this transport is not verified, naming the field to
// change; "" when it is.
func (t transport) insecure() string {
	switch t.mode {
	case TLSSkipVerify:
		return "spec.mysql.tls is SkipVerify: rekey's MySQL connections use TLS but accept any server certificate, so whoever can intercept them can pose as an instance and learn the admin's and users' passwords; set spec.mysql.tls to Required with spec.mysql.tlsCASecretRef naming the CA of the servers' certificates"
	case TLSPreferred:
		return "spec.mysql.tls is Preferred: rekey's MySQL connections use TLS only when the server offers it and never verify the certificate, so the passwords they carry can be intercepted; set spec.mysql.tls to Required with spec.mysql.tlsCASecretRef naming the CA of the servers' certificates"
	case TLSDisabled:
		return "spec.mysql.tls is Disabled: rekey's MySQL connections are plaintext, so the passwords they carry can be read on the network; set spec.mysql.tls to Required with spec.mysql.tlsCASecretRef naming the CA of the servers' certificates"
	}
	return ""
}

// InsecureTransport implements engine.TransportReporter.
func (b *Backend) InsecureTransport() string { return b.transport.insecure() }

var _ engine.TransportReporter = (*Backend)(nil)

// config is the driver configuration of one connection. It is built
// field by field, never parsed from a DSN, so no value from a spec or a
// Secret can turn into a driver option.
func (t transport) config(inst Instance, user, password string) *driver.Config {
	c := driver.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = user, password, "tcp", inst.Addr
	c.Timeout, c.ReadTimeout, c.WriteTimeout = dialTimeout, 30*time.Second, 30*time.Second
	switch t.mode {
	case TLSDisabled:
		c.TLS = nil
	case TLSSkipVerify:
		c.TLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // explicit opt-out, reported by InsecureTransport
	case TLSPreferred:
		c.TLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // explicit opt-out, reported by InsecureTransport
		c.AllowFallbackToPlaintext = true
	default:
		name := t.serverName
		if name == "" {
			name = inst.serverName()
		}
		c.TLS = &tls.Config{RootCAs: t.roots, ServerName: name, MinVersion: tls.VersionTLS12}
	}
	return c
}

// open returns a pool for one instance; the caller closes it.
func (t transport) open(inst Instance, user, password string) (*sql.DB, error) {
	conn, err := driver.NewConnector(t.config(inst, user, password))
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// serverName is the name the instance's certificate must hold when
// tlsServerName is not set: the host it is known by in the spec, before
// any test address mapping.
func (i Instance) serverName() string {
	if i.ServerName != "" {
		return i.ServerName
	}
	host, _, err := net.SplitHostPort(i.Addr)
	if err != nil {
		return i.Addr
	}
	return host
}

// validateInstance re-checks what admission checked for hosts[], and what
// nothing checked for a StatefulSet's own serviceName.
func validateInstance(i Instance) error {
	if !addrPattern.MatchString(i.Addr) {
		return fmt.Errorf("instance %s: address %q is not host:port (letters, digits, '-' and '.', then a port)", i.Name, i.Addr)
	}
	_, port, _ := net.SplitHostPort(i.Addr)
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("instance %s: port %s is not between 1 and 65535", i.Name, port)
	}
	if i.ServerName != "" && (len(i.ServerName) > 253 || !serverNamePattern.MatchString(i.ServerName)) {
		return fmt.Errorf("instance %s: host %q is not a DNS name", i.Name, i.ServerName)
	}
	return nil
}

// connError classifies a failure to connect: a certificate that does not
// verify is a refusal that says what to fix (waiting would not help: the
// trust is configured, and it is re-read on every reconcile), as is a
// server that requires TLS the spec turned off or an answer that is not
// MySQL's; anything else an unreachable instance, which holds the phase
// until it answers. The text is rekey's own (explain): nothing the server
// sent, its certificate's names included, reaches a message.
func (t transport) connError(inst Instance, err error, passwords ...string) error {
	if msg := t.explainTLS(inst, err); msg != "" {
		return &engine.Refusal{Reason: string(reason.BackendError), Message: msg}
	}
	kind, text := explain(err)
	switch kind {
	case failTLS:
		return &engine.Refusal{Reason: string(reason.BackendError), Message: fmt.Sprintf(
			"%s: %s, so rekey sent it no credentials: set spec.mysql.tls to Required (with spec.mysql.tlsCASecretRef naming the CA of the servers' certificates), or enable TLS on the server", inst.Name, text)}
	case failOther:
		return &engine.Refusal{Reason: string(reason.BackendError), Message: fmt.Sprintf(
			"%s: %s; nothing was changed: check that spec.mysql names the MySQL servers' addresses and ports", inst.Name, text)}
	case failAuth, failLocked:
		return &engine.Refusal{Reason: string(reason.AuthenticationFailed), Message: fmt.Sprintf(
			"%s refused a login: %s; nothing was changed: fix the account or its password", inst.Name, text)}
	case failPermission:
		return &engine.Refusal{Reason: string(reason.PermissionDenied), Message: fmt.Sprintf(
			"%s: %s; nothing was changed: grant the account that privilege", inst.Name, text)}
	}
	return unreachable(inst, &redactedError{text, err})
}

// explainTLS says what to fix when err is a TLS verification failure, ""
// when it is not one. It names the certificate's fault, never its names
// or issuer: a set can point rekey at any TLS service the manager reaches.
func (t transport) explainTLS(inst Instance, err error) string {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &unknown):
		fix := "put the CA that signed it in the Secret key named by spec.mysql.tlsCASecretRef"
		if t.roots != nil {
			fix = "the CA in the Secret key named by spec.mysql.tlsCASecretRef did not sign it: put the right CA there"
		}
		return fmt.Sprintf("the TLS certificate of %s is not trusted (signed by an unknown authority), so rekey sent it no credentials: %s", inst.Name, fix)
	case errors.As(err, &hostname):
		return fmt.Sprintf("the TLS certificate of %s is not valid for %s, the name rekey verifies, so rekey sent it no credentials: set spec.mysql.tlsServerName to a name the certificate holds, or give the instances certificates for their own hosts", inst.Name, t.verifiedName(inst))
	case errors.As(err, &invalid):
		return fmt.Sprintf("the TLS certificate of %s is not valid (%s), so rekey sent it no credentials: renew it", inst.Name, invalidReason(invalid))
	case errors.Is(err, driver.ErrNoTLS):
		return fmt.Sprintf("%s does not offer TLS, which spec.mysql.tls %s requires: enable TLS on the server (ssl-cert, ssl-key)", inst.Name, t.mode)
	}
	return ""
}

// verifiedName is the name inst's certificate is verified for.
func (t transport) verifiedName(inst Instance) string {
	if t.serverName != "" {
		return t.serverName
	}
	return inst.serverName()
}

// invalidReason is rekey's word for why a certificate is invalid.
func invalidReason(e x509.CertificateInvalidError) string {
	switch e.Reason {
	case x509.Expired:
		return "expired or not yet valid"
	case x509.NotAuthorizedToSign:
		return "signed by a certificate that is not a CA"
	case x509.IncompatibleUsage:
		return "not for server authentication"
	case x509.NameConstraintsWithoutSANs, x509.CANotAuthorizedForThisName, x509.CANotAuthorizedForExtKeyUsage:
		return "outside its CA's constraints"
	}
	return fmt.Sprintf("x509 reason %d", e.Reason)
}
