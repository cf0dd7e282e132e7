// Package rabbitmq is rekey's RabbitMQ backend: every generation
// is a new user <base>-g<N> with the same tags and permissions, made through
// the management HTTP API; the old user is deleted only on Retire, which the
// controller holds back until every consumer on the cluster has moved.
package rabbitmq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// Source Secret keys, and the distribution Secrets' too: a generation is a
// user name and its password, both needed by a consumer to log in.
const (
	KeyUsername = "username"
	KeyPassword = "password"
)

// DefaultTimeout bounds one management API request, so that a broker that
// accepts connections but never answers still releases the phase.
const DefaultTimeout = 30 * time.Second

// Backend rotates one user of one RabbitMQ cluster. It keeps no state
// between calls: the broker is asked every time.
type Backend struct {
	// Timeout bounds each management API request; DefaultTimeout by
	// default.
	Timeout time.Duration
	// LiveOwner says whether a CredentialSet UID found in an owner mark
	// belongs to a set that exists. Retiring a user several sets adopted
	// deletes it only when no other existing set's mark is left; nil
	// counts every mark as live (the user is then kept, never deleted
	// early).
	LiveOwner func(uid string) bool
	// Fence, if set, is asked before every request that changes the broker
	// and refuses once this manager is no longer the leader.
	Fence func(ctx context.Context) error
	// Term is this manager's leadership term (0: none), recorded on the
	// broker and checked before every request that changes it (fence.go).
	Term int64

	endpoint      string // management API base URL, no trailing slash
	adminUser     string
	adminPassword string
	adminSecret   string // where the admin's credentials are, named when refused
	transport     http.RoundTripper
	plaintext     bool   // an http:// endpoint, accepted by spec.rabbitmq.allowPlaintextHTTP
	skipVerify    bool   // https without certificate verification
	owner         string // the CredentialSet's UID, marked on every user rekey creates
	base          string
	adopt         string // spec.rabbitmq.adopt.user: generation 1 is this existing user
	tags          []string
	permissions   []v1.RabbitMQPermission
	topics        []v1.RabbitMQTopicPermission
	url           *transportSpec // nil: no transport_url is rendered
}

var (
	_ engine.Backend       = (*Backend)(nil)
	_ engine.Scoped        = (*Backend)(nil)
	_ engine.Deprovisioner = (*Backend)(nil)
	_ engine.Releaser      = (*Backend)(nil)

	_ engine.TransportReporter = (*Backend)(nil)
)

// New builds the backend for a spec, checking what admission cannot:
// that the endpoint parses, the permission patterns are regular
// expressions, and the rendered keys do not collide; and again what
// admission checks, should a set predate its rules. owner is the
// CredentialSet's UID: users rekey creates are tagged with it, and users
// without it are never changed or deleted. caPEM is the content of
// tls.caSecretRef (nil for the system roots).
func New(spec *v1.RabbitMQSpec, owner, adminUser, adminPassword string, caPEM []byte) (*Backend, error) {
	if spec == nil {
		return nil, errors.New("rabbitmq: no spec")
	}
	if err := checkOwner(owner); err != nil {
		return nil, err
	}
	endpoint, https, err := parseEndpoint(spec.Endpoint)
	if err != nil {
		return nil, err
	}
	if err := checkScheme(spec, https); err != nil {
		return nil, err
	}
	if adminUser == "" || adminPassword == "" {
		return nil, errors.New("rabbitmq.admin: the admin Secret must hold a non-empty username and password")
	}
	if err := checkBase(spec.User.Base); err != nil {
		return nil, err
	}
	adopt, err := checkAdopt(spec)
	if err != nil {
		return nil, err
	}
	if err := checkTags(spec.User.Tags); err != nil {
		return nil, err
	}
	if err := checkPermissions(spec.User); err != nil {
		return nil, err
	}
	t, err := resolveTransport(spec)
	if err != nil {
		return nil, err
	}
	rt, err := newTransport(https, spec.TLS, caPEM)
	if err != nil {
		return nil, err
	}
	return &Backend{
		Timeout:  DefaultTimeout,
		endpoint: endpoint, adminUser: adminUser, adminPassword: adminPassword, transport: rt,
		plaintext: !https, skipVerify: https && spec.TLS != nil && spec.TLS.InsecureSkipVerify,
		owner: owner, base: spec.User.Base, adopt: adopt, tags: spec.User.Tags,
		permissions: spec.User.Permissions, topics: spec.User.TopicPermissions,
		url: t, adminSecret: adminSecretName(spec.Admin),
	}, nil
}

// adminSecretName names the admin Secret and its keys, as a refusal
// tells a person where to fix the credentials.
func adminSecretName(a v1.RabbitMQAdmin) string {
	user, pw := a.UsernameKey, a.PasswordKey
	if user == "" {
		user = "username"
	}
	if pw == "" {
		pw = "password"
	}
	if a.SecretRef.Name == "" {
		return "Secret"
	}
	return fmt.Sprintf("Secret %s (keys %s and %s)", a.SecretRef.Name, user, pw)
}

// InsecureTransport implements engine.TransportReporter: the admin's
// password travels with every request, and rotated users' passwords are
// set and checked over the same connection.
func (b *Backend) InsecureTransport() string {
	switch {
	case b.plaintext:
		return fmt.Sprintf("spec.rabbitmq.allowPlaintextHTTP is true: the admin's and every rotated user's password cross the network to %s unencrypted; serve the management API over https and make the endpoint https:// (with tls.caSecretRef for a private CA)", b.endpoint)
	case b.skipVerify:
		return fmt.Sprintf("spec.rabbitmq.tls.insecureSkipVerify is true: the certificate of %s is not verified, so whoever intercepts the connection gets the admin's and every rotated user's password; put the CA that signed it in spec.rabbitmq.tls.caSecretRef and remove insecureSkipVerify", b.endpoint)
	}
	return ""
}

// Endpoint is the management API the backend talks to; it names the
// instance in UnreachableErrors.
func (b *Backend) Endpoint() string { return b.endpoint }

// Keys implements engine.Backend.
func (b *Backend) Keys() []string { return []string{KeyUsername, KeyPassword} }

// Traits implements engine.Backend: rekey mints every password and stores
// it before the broker learns it (the broker keeps only a hash), and the
// old user stays valid until Retire.
func (b *Backend) Traits() engine.Traits { return engine.Traits{ReadBack: false, Overlap: true} }

// NewSecrets implements engine.Backend.
func (b *Backend) NewSecrets(gen int64) (engine.Secrets, error) {
	if gen < 1 {
		return nil, fmt.Errorf("rabbitmq: generation %d: generations start at 1", gen)
	}
	pw, err := engine.NewPassword()
	if err != nil {
		return nil, err
	}
	return engine.Secrets{KeyUsername: UserName(b.base, gen), KeyPassword: pw}, nil
}

// Version implements engine.Backend with the broker's rabbitmq_version,
// read as the admin: cur is not needed.
func (b *Backend) Version(ctx context.Context, _ engine.Secrets) (string, error) {
	ov, err := b.api(ctx).Overview()
	if err != nil {
		return "", b.redact(b.apiError(ctx, "read the overview", err))
	}
	if !versionShape.MatchString(ov.RabbitMQVersion) {
		// Quoted nowhere: whatever answers at the endpoint is not repeated.
		return "", &engine.Refusal{Reason: string(reason.BackendError), Message: fmt.Sprintf(
			"read the overview on %s: it names no rabbitmq_version rekey can read, so this is not the RabbitMQ management API: check spec.rabbitmq.endpoint. Nothing was changed", b.endpoint)}
	}
	return ov.RabbitMQVersion, nil
}

// versionShape is what a broker's rabbitmq_version looks like (3.10.8,
// 4.0.0-rc.1+build); it ends up in status.keyVersion.
var versionShape = regexp.MustCompile(`^[0-9]{1,4}(\.[0-9]{1,6}){1,3}([-+~][0-9A-Za-z.+~-]{1,40})?$`)

// clusterNameShape is what a RabbitMQ cluster name usually looks like
// (rabbit@host, a Kubernetes name); others are kept as a digest.
var clusterNameShape = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9@._:+]{0,252}$`)

// clusterID is the status.cluster form of a cluster name: the name when
// it has the usual shape, else a digest of it, so that a name (or any text
// that answers at the endpoint) is never repeated where the tenant reads.
func clusterID(name string) string {
	if clusterNameShape.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "sha256-" + hex.EncodeToString(sum[:12])
}

// ClusterID implements engine.Scoped with the cluster's name, which every
// node of a cluster reports alike whichever endpoint reaches it. Clusters
// that share a name (the same Kubernetes name in two namespaces) are taken
// for one: retirement then waits for both, which is slow but never early.
func (b *Backend) ClusterID(ctx context.Context) (string, error) {
	cn, err := b.api(ctx).GetClusterName()
	if err != nil {
		return "", b.redact(b.apiError(ctx, "read the cluster name", err))
	}
	if cn == nil || cn.Name == "" {
		return "", fmt.Errorf("%s reports an empty cluster_name", b.endpoint)
	}
	return clusterID(cn.Name), nil
}
