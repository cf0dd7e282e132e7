// Package cephkube builds the Ceph backend for a CredentialSet from what
// Kubernetes holds (the admin keyring Secret, the other sets on the
// cluster), keeps the set's status of its bootstrap keys, prior
// generations and caps, says how the kubectl plugin describes Ceph sets,
// and registers the backend and ceph-csi's formats.
package cephkube

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

func init() {
	registry.Register(Entry)
	registerFormats()
}

// Entry is the Ceph backend's registration.
var Entry = registry.Entry{
	Kind:    "ceph",
	Field:   "spec.ceph",
	Selects: func(cs *v1.CredentialSet) bool { return cs.Spec.Ceph != nil },
	Build:   build,
	// One key per monitor host: two sets sharing any monitor share the
	// cluster.
	LockKeys: func(cs *v1.CredentialSet) []string {
		var keys []string
		for _, m := range cs.Spec.Ceph.Monitors {
			keys = append(keys, "ceph:"+monHost(m))
		}
		return keys
	},
	Describe:   describe,
	Identities: identities,
	Flags: []registry.Flag{
		{Name: FlagCLI, Default: "ceph", Usage: "the ceph CLI the Ceph backend runs (a path, or a name looked up in PATH); a CredentialSet never names a program"},
		{Name: FlagWorkDir, Default: os.TempDir(), Usage: "where ceph commands' config and keyring files are written (mode 0600, removed after each command)"},
	},
}

// The manager's flags of the Ceph backend.
const (
	// FlagCLI is the ceph program it runs.
	FlagCLI = "ceph-cli"
	// FlagWorkDir is where it writes the ceph.conf and keyring files of
	// one command (mode 0600, removed after).
	FlagWorkDir = "ceph-work-dir"
)

// identities are the entities of the spec, and their generations under
// Overlapping rotation, for messages.
func identities(cs *v1.CredentialSet) string {
	var ents []string
	for _, e := range cs.Spec.Ceph.Entities {
		ents = append(ents, e.Name)
	}
	gens := ""
	if cs.Spec.Ceph.RotationStrategy() == v1.CephOverlapping {
		gens = " (and their generations <entity>.<N>)"
	}
	return "Ceph entities " + registry.Summarize(ents, "entities", "the set's spec") + gens
}

// build makes the Ceph backend. Before any other Ceph command it resolves
// an interrupted admin key rotation: until then the admin keyring Secret
// may hold a dead key.
func build(ctx context.Context, cs *v1.CredentialSet, k registry.Kube, o registry.Options) (*registry.Plan, error) {
	spec := cs.Spec.Ceph
	store := &keyringStore{k: k, namespace: cs.Namespace, ref: spec.Admin.KeyringSecretRef}
	b, err := ceph.New(spec, store, o.Settings.Value(FlagCLI))
	if err != nil {
		return nil, &registry.SpecError{Msg: err.Error()}
	}
	if err := uniqueEntities(ctx, k, cs); err != nil {
		return nil, err
	}
	b.WorkDir = o.Settings.Value(FlagWorkDir)
	b.InitialGeneration = engine.InitialGeneration(cs.Spec.Rotation)
	b.Owner = ceph.Owner{UID: string(cs.UID), Set: cs.Namespace + "/" + cs.Name}
	b.Fence, b.Term = k.Fence, k.FenceTerm()
	b.Report = func(why reason.Reason, msg string) {
		typ := "Normal"
		if why == reason.AdminRotationFailed {
			typ = "Warning"
		}
		k.Event(typ, why, "Ceph", msg)
	}
	if _, err := b.RecoverAdmin(ctx); err != nil {
		return nil, err
	}
	if err := removeUnusedKeys(ctx, k, cs, b); err != nil {
		return nil, err
	}
	if err := trimPriors(ctx, k, cs, b); err != nil {
		return nil, err
	}
	if err := checkCaps(ctx, k, cs, b); err != nil {
		return nil, err
	}
	return &registry.Plan{Backend: b}, nil
}

// uniqueEntities refuses a set that would rotate an entity another set on
// the same cluster already rotates (ceph.Clash): the two would delete each
// other's generations. A set that provisioned keeps it (of two that did,
// the one created first), so a working set is never stopped by a newcomer,
// and the newcomer changes nothing on the cluster until its spec is fixed.
// A set that never provisioned keeps nothing: one created first with an
// admin keyring that does not work must not squat an entity another
// namespace's set needs (the ownership record on the monitors decides
// between two that provision at once).
func uniqueEntities(ctx context.Context, k registry.Kube, cs *v1.CredentialSet) error {
	sets, err := k.Sets(ctx)
	if err != nil {
		return err
	}
	for i := range sets {
		o := &sets[i]
		if o.UID == cs.UID || o.Spec.Ceph == nil || !keepsEntities(o, cs) {
			continue
		}
		if what := ceph.Clash(o.Spec.Ceph, cs.Spec.Ceph); what != "" {
			return &registry.SpecError{Msg: fmt.Sprintf("%s already rotates %s on this Ceph cluster: two sets would delete each other's generations, so this set changed nothing. Remove or rename that entry of spec.ceph.entities (or delete one of the two sets)",
				registry.OtherSet(cs, o), what)}
		}
		if what := ceph.AdminClash(o.Spec.Ceph, cs.Spec.Ceph); what != "" {
			return &registry.SpecError{Msg: fmt.Sprintf("%s is on the same Ceph cluster, and %s; this set changed nothing", registry.OtherSet(cs, o), what)}
		}
	}
	return nil
}

// keepsEntities: o keeps clashing entities rather than cs — it provisioned
// and cs has not, or both have and o was created first.
func keepsEntities(o, cs *v1.CredentialSet) bool {
	if op, cp := o.Status.KeyGeneration > 0, cs.Status.KeyGeneration > 0; op != cp || !op {
		return op
	}
	return setFirst(o, cs)
}

// setFirst tells whether a was created before b (by name when the API
// server gave both the same second), so that of two clashing sets exactly
// one, always the same, is refused.
func setFirst(a, b *v1.CredentialSet) bool {
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// monHost is a mon_host entry without its messenger prefix and standard
// port (3300 and 6789: one mon answers on both); a monitor on another
// port keeps it.
func monHost(m string) string {
	m = strings.ToLower(m)
	m = strings.TrimPrefix(strings.TrimPrefix(m, "v1:"), "v2:")
	host, port, err := net.SplitHostPort(m)
	if err != nil {
		// No port: a host name, an IPv4 address or a bracketed IPv6 one.
		return strings.TrimSuffix(strings.TrimPrefix(m, "["), "]")
	}
	if port == "3300" || port == "6789" {
		return host
	}
	return net.JoinHostPort(host, port)
}
