package postgres

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// DefaultTimeout bounds one step on one server (connect and statements), so
// that a server that accepts connections but never answers still releases
// the phase.
const DefaultTimeout = 30 * time.Second

// DefaultReplayWait bounds how long a replica may take to replay a change
// before the phase stops and is retried.
const DefaultReplayWait = time.Minute

// Backend rotates the logins of one set on one PostgreSQL cluster. It keeps
// no state between calls: the servers are asked every time.
type Backend struct {
	Timeout    time.Duration
	ReplayWait time.Duration
	// AddressMap, when set, rewrites host:port before dialling (tests).
	AddressMap func(string) string

	hosts         []string
	database      string
	adminUser     string
	adminPassword string
	tlsMode       string
	roots         *x509.CertPool // nil: the system roots
	owner         string
	logins        []login
	conn          *connection // nil: the login alone is distributed
	terminate     bool        // spec.postgres.terminateSessions

	// Fence, if set, is asked before every statement that changes roles,
	// and refuses once this manager is no longer the leader.
	Fence func(ctx context.Context) error
	// Term is this manager's leadership term (0: none): every transaction
	// that changes the set's roles records it on them and refuses where a
	// later one is recorded (see fence.go).
	Term int64
}

// fence asks the Fence, if any; its refusal passes safe() unchanged.
func (b *Backend) fence(ctx context.Context) error {
	if b.Fence == nil {
		return nil
	}
	if err := b.Fence(ctx); err != nil {
		return &fencedError{err}
	}
	return nil
}

// fencedError is the fence's refusal.
type fencedError struct{ err error }

func (e *fencedError) Error() string { return e.err.Error() }
func (e *fencedError) Unwrap() error { return e.err }

var (
	_ engine.Backend           = (*Backend)(nil)
	_ engine.Deprovisioner     = (*Backend)(nil)
	_ engine.Releaser          = (*Backend)(nil)
	_ engine.TransportReporter = (*Backend)(nil)
)

// New builds the backend for a spec, checking again what admission checks
// should a set predate its rules. owner is the CredentialSet's UID; caPEM
// the content of tlsCASecretRef (nil for the system roots).
func New(spec *v1.PostgresSpec, owner, adminUser, adminPassword string, caPEM []byte) (*Backend, error) {
	if spec == nil {
		return nil, errors.New("postgres: no spec")
	}
	if !uidShape.MatchString(owner) {
		return nil, fmt.Errorf("postgres: the CredentialSet's UID %q is not a UUID", owner)
	}
	if len(spec.Hosts) == 0 && len(spec.StatefulSets) == 0 {
		// A StatefulSet scaled to 0 has no instance: the plan says so.
		return nil, errors.New("postgres.hosts: name at least one instance (host:port)")
	}
	for _, h := range spec.Hosts {
		if _, _, err := net.SplitHostPort(h); err != nil {
			return nil, fmt.Errorf("postgres.hosts: %q is not host:port", h)
		}
	}
	if adminUser == "" || adminPassword == "" {
		return nil, errors.New("postgres.admin: the admin Secret must hold a non-empty username and password")
	}
	logins, err := loginsOf(spec)
	if err != nil {
		return nil, err
	}
	for _, l := range logins {
		if l.adopt == adminUser {
			return nil, fmt.Errorf("%s.role %q is the admin, which rekey never drops: name the login role applications use today", l.adoptField, l.adopt)
		}
	}
	mode := spec.TLS
	if mode == "" {
		mode = "VerifyFull"
	}
	var roots *x509.CertPool
	if len(caPEM) > 0 {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("postgres.tlsCASecretRef: the key holds no PEM certificate")
		}
	}
	db := spec.Database
	if db == "" {
		db = "postgres"
	}
	return &Backend{
		Timeout: DefaultTimeout, ReplayWait: DefaultReplayWait,
		hosts: spec.Hosts, database: db, adminUser: adminUser, adminPassword: adminPassword,
		tlsMode: mode, roots: roots, owner: owner, logins: logins,
		conn: newConnection(spec.Connection), terminate: spec.TerminateSessions,
	}, nil
}

// tlsConfig is the client side of mode for host; nil is plaintext.
func (b *Backend) tlsConfig(host string) *tls.Config {
	switch b.tlsMode {
	case "Disable":
		return nil
	case "Require":
		return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // an explicit, reported opt-out
	}
	return &tls.Config{RootCAs: b.roots, ServerName: host, MinVersion: tls.VersionTLS12}
}

// InsecureTransport implements engine.TransportReporter.
func (b *Backend) InsecureTransport() string {
	switch b.tlsMode {
	case "Disable":
		return "spec.postgres.tls is Disable: the admin's and every rotated login's password cross the network to " + strings.Join(b.hosts, ", ") + " unencrypted (a SCRAM exchange hides the password itself, not what the session then carries); enable ssl on the servers and remove spec.postgres.tls (VerifyFull is the default)"
	case "Require":
		return "spec.postgres.tls is Require: the servers' certificates are not verified, so whoever intercepts a connection can act as the admin; put the CA that signed them in spec.postgres.tlsCASecretRef and remove spec.postgres.tls (VerifyFull is the default)"
	}
	return ""
}

// Keys implements engine.Backend: each login's role and password.
func (b *Backend) Keys() []string {
	var keys []string
	for _, l := range b.logins {
		keys = append(keys, l.userKey(), l.passwordKey())
	}
	return keys
}

// Traits implements engine.Backend: rekey mints every password and stores
// it before the server learns it (it keeps only a verifier), and the old
// login stays valid until Retire.
func (b *Backend) Traits() engine.Traits { return engine.Traits{ReadBack: false, Overlap: true} }

// NewSecrets implements engine.Backend.
func (b *Backend) NewSecrets(gen int64) (engine.Secrets, error) {
	if gen < 1 {
		return nil, fmt.Errorf("postgres: generation %d: generations start at 1", gen)
	}
	s := engine.Secrets{}
	for _, l := range b.logins {
		pw, err := engine.NewPassword()
		if err != nil {
			return nil, err
		}
		s[l.userKey()], s[l.passwordKey()] = loginName(l.base, gen), pw
	}
	return s, nil
}

// Render implements engine.Backend: each login in its layout, under its
// prefix.
func (b *Backend) Render(s engine.Secrets) (map[string][]byte, error) {
	ids, err := b.identities(s, "distributed")
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, id := range ids {
		for k, v := range render(b.conn, id.user, id.password) {
			out[id.prefix+k] = v
		}
	}
	return out, nil
}

// versionShape is the leading part of server_version ("15.18").
var versionShape = regexp.MustCompile(`^[0-9]{1,4}(\.[0-9]{1,6}){0,3}`)

// Version implements engine.Backend with the primary's server_version.
func (b *Backend) Version(ctx context.Context, _ engine.Secrets) (_ string, err error) {
	defer func() { err = safe(err) }()
	top, err := b.topology(ctx)
	if err != nil {
		return "", err
	}
	defer top.close(ctx)
	var v string
	if err := top.primary.conn.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&v); err != nil {
		return "", b.fail(top.primary.host, "read server_version", err)
	}
	if s := versionShape.FindString(v); s != "" {
		return s, nil
	}
	return "", &engine.Refusal{Reason: string(reason.BackendError), Message: fmt.Sprintf(
		"%s reports a server_version rekey cannot read: check spec.postgres.hosts", top.primary.host)}
}
