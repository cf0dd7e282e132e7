// Package ceph is rekey's Ceph backend: cephx keys rotated in
// place with `ceph auth rotate`, or overlapping through one entity per
// generation, and the admin key rotated through a temporary
// client.admin-rotator. It talks to the cluster only through the ceph CLI,
// as Rook does, and asks the cluster every time: it keeps no state.
package ceph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// Backend rotates the keys of one CephSpec's entities.
type Backend struct {
	// Store holds the admin keyring every command runs with, and the
	// rotator's while the admin key rotates. Required.
	Store KeyringStore
	// WorkDir is where each operation's ceph.conf and keyring files live
	// (mode 0600, removed when the operation ends); default os.TempDir().
	WorkDir string
	// Report, if set, tells the controller what it should announce as an
	// Event: orphans removed, priors retired, admin key rotated or
	// recovered. Messages name entities, never keys.
	Report func(r reason.Reason, msg string)
	// Owner is the set this backend acts for: rekey rotates and deletes
	// only entities recorded for it (see owner.go). Required.
	Owner Owner
	// Fence, if set, is asked right before every command that changes the
	// cluster, and refuses once this manager is no longer the leader.
	Fence func(ctx context.Context) error
	// Term is this manager's leadership term (0: none), recorded in the
	// cluster and checked before every command that changes it (fence.go).
	Term int64
	// ConnectTimeout bounds the CLI's hunt for a monitor (default 10s);
	// CommandTimeout bounds a command after that (default 30s).
	ConnectTimeout time.Duration
	CommandTimeout time.Duration
	// InitialGeneration is the generation of the keys Provision mints
	// (engine.InitialGeneration of the set's rotation spec); 0 means 1.
	InitialGeneration int64

	cli      string
	monitors []string
	conf     string
	admin    string
	adminRef v1.SecretKeyRef // where the admin's keyring is, named when refused
	overlap  bool
	keep     int
	entities []v1.CephEntity
}

var (
	_ engine.Backend   = (*Backend)(nil)
	_ engine.Inventory = (*Backend)(nil)
)

// New checks the spec and applies its defaults (a spec that did not pass
// the API server has none). cli is the ceph CLI to run, a setting of the
// manager ("" means "ceph" from PATH): a spec never names a program.
func New(spec *v1.CephSpec, store KeyringStore, cli string) (*Backend, error) {
	if store == nil {
		return nil, errors.New("ceph backend: no keyring store")
	}
	options := make(map[string]string, len(spec.Config))
	for k, v := range spec.Config {
		options[k] = string(v)
	}
	conf, err := buildConf(spec.Monitors, options)
	if err != nil {
		return nil, err
	}
	b := &Backend{Store: store, cli: cli, monitors: spec.Monitors, conf: conf,
		admin: spec.AdminEntity(), adminRef: spec.Admin.KeyringSecretRef, keep: int(spec.PriorKeysKept()), entities: spec.Entities}
	if b.cli == "" {
		b.cli = "ceph"
	}
	switch spec.RotationStrategy() {
	case v1.CephInPlace:
	case v1.CephOverlapping:
		b.overlap = true
	default:
		return nil, fmt.Errorf("unknown strategy %q", spec.Strategy)
	}
	if b.keep < 0 {
		return nil, fmt.Errorf("keepPriorKeyCount %d is negative", b.keep)
	}
	if !validEntity(b.admin) || !strings.HasPrefix(b.admin, "client.") || b.admin == RotatorEntity {
		return nil, fmt.Errorf("admin entity %q must be a client entity other than %s", b.admin, RotatorEntity)
	}
	if len(b.entities) == 0 {
		return nil, errors.New("no entities")
	}
	for i, e := range b.entities {
		if err := b.checkEntity(e.Name, b.entities[:i]); err != nil {
			return nil, err
		}
		if err := validateEntityCaps(e); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// checkEntity refuses names the rotation could confuse: under Overlapping
// client.csi.2 would be both an entity and client.csi's generation 2.
func (b *Backend) checkEntity(name string, before []v1.CephEntity) error {
	if !validEntity(name) || strings.HasPrefix(name, "mon.") || name == RotatorEntity {
		return fmt.Errorf("entity %q cannot rotate here", name)
	}
	if b.overlap && (!strings.HasPrefix(name, "client.") || name == b.admin) {
		return fmt.Errorf("entity %s: Overlapping rotation creates an entity per generation, only for client entities other than the admin", name)
	}
	for _, o := range before {
		_, clash1 := generationOf(o.Name, name)
		_, clash2 := generationOf(name, o.Name)
		if o.Name == name || b.overlap && (clash1 || clash2) {
			return fmt.Errorf("entities %s and %s clash: one names a generation of the other", o.Name, name)
		}
	}
	return nil
}

func (b *Backend) connectTimeout() time.Duration {
	if b.ConnectTimeout >= time.Second {
		return b.ConnectTimeout.Truncate(time.Second)
	}
	return 10 * time.Second
}

func (b *Backend) commandTimeout() time.Duration {
	if b.CommandTimeout > 0 {
		return b.CommandTimeout
	}
	return 30 * time.Second
}

func (b *Backend) report(r reason.Reason, format string, args ...any) {
	if b.Report != nil {
		b.Report(r, fmt.Sprintf(format, args...))
	}
}

// Keys implements engine.Backend: the spec's entity names, in spec order.
func (b *Backend) Keys() []string {
	keys := make([]string, len(b.entities))
	for i, e := range b.entities {
		keys[i] = e.Name
	}
	return keys
}

// Traits implements engine.Backend: Ceph mints every key and hands it back
// (`auth get`), so a crash is recovered by reading, never by guessing.
func (b *Backend) Traits() engine.Traits {
	return engine.Traits{ReadBack: true, Overlap: b.overlap}
}

// NewSecrets implements engine.Backend; the engine never calls it for a
// ReadBack backend.
func (b *Backend) NewSecrets(int64) (engine.Secrets, error) {
	return nil, errors.New("ceph mints its own keys (Traits.ReadBack): NewSecrets is never called")
}

// Render implements engine.Backend: for each entity E the keyring file
// (E.keyring), the bare key (E.key), the entity's full name (E.name, e.g.
// client.csi.3) and its id (E.id, csi.3, what --id and Ceph-CSI's userID
// take).
func (b *Backend) Render(s engine.Secrets) (map[string][]byte, error) {
	out := make(map[string][]byte, 4*len(s))
	for k, v := range s {
		kr, err := ParseKeyring(v)
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", k, err)
		}
		out[KeyringKey(k)] = []byte(kr.String())
		out[KeyKey(k)] = []byte(kr.Key)
		out[NameKey(k)] = []byte(kr.Entity)
		out[IDKey(k)] = []byte(entityID(kr.Entity))
	}
	return out, nil
}

// Version implements engine.Backend: the version of the mon that answers,
// the daemon that mints keys (`ceph version` without dashes asks the mon,
// not the CLI). It runs as the admin of the store, not with cur.
func (b *Backend) Version(ctx context.Context, _ engine.Secrets) (string, error) {
	s, err := b.open(ctx)
	if err != nil {
		return "", err
	}
	defer s.close()
	return s.version(ctx)
}

func (s *session) version(ctx context.Context) (string, error) {
	out, err := s.run(ctx, "version", "--format", "json")
	if err != nil {
		return "", err
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return "", fmt.Errorf("ceph version: unreadable JSON output (%d bytes)", len(out))
	}
	// "ceph version 20.2.4 (7f79…) tentacle (stable)"
	f := strings.Fields(v.Version)
	if len(f) < 3 || f[0] != "ceph" || f[1] != "version" || !cephVersionShape.MatchString(f[2]) {
		// Not quoted: the answer is the monitor's, and it reaches status.
		return "", errors.New("ceph version: an answer rekey cannot read as a Ceph version")
	}
	return f[2], nil
}

// cephVersionShape is a Ceph release's version (20.2.4, 19.2.3-123-gabc).
var cephVersionShape = regexp.MustCompile(`^[0-9]{1,4}(\.[0-9]{1,6}){1,3}(-[0-9A-Za-z.-]{1,40})?$`)

// keyringOf reads the keyring a source Secret holds for a spec entity and
// checks that it names that entity (or, Overlapping, one of its
// generations), returning the generation.
func (b *Backend) keyringOf(s engine.Secrets, name, which string) (Keyring, int64, error) {
	v, ok := s[name]
	if !ok {
		return Keyring{}, 0, fmt.Errorf("the %s secrets have no keyring for %s", which, name)
	}
	kr, err := ParseKeyring(v)
	if err != nil {
		return Keyring{}, 0, fmt.Errorf("the %s keyring of %s: %w", which, name, err)
	}
	gen, ok := generationOf(name, kr.Entity)
	if !ok || !b.overlap && gen != 0 {
		return Keyring{}, 0, fmt.Errorf("the %s keyring of %s is for another entity, %s", which, name, kr.Entity)
	}
	return kr, gen, nil
}

func mismatch(format string, args ...any) error {
	return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: fmt.Sprintf(format, args...)}
}
