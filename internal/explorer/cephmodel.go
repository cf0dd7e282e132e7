package explorer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// The Ceph world (option Ceph): one monitor, whose entities are the
// World's one instance's accounts, keyed by entity name (a key each,
// Marked while the set's ownership record names it). The set rotates one
// entity, client.app, Overlapping: each generation is an entity of its
// own, client.app.<N>, whose key Ceph mints and rekey reads back
// (Traits.ReadBack). A rotation creates the next generation beside the
// current one and removes the newer ones an interrupted rotation left; the
// discard removes the older generations (keepPriorKeyCount 0); a reset
// removes the generations newer than the current one; a deletion keeps the
// current generation (Discard, its record dropped) or removes it (Delete),
// and removes every other. The decisions are the Ceph backend's
// (internal/backend/ceph overlap.go, inplace.go, provision.go,
// deletion.go), each proven on a real ceph-mon by that package's tests
// (TestOverlappingRotation, TestOverlappingCrashLeftovers, the deletion
// tests) and test/e2e's (TestCephOverlapping, TestCephDeletion,
// TestCephRestoredGeneration).
//
// A key here names its entity ("client.app.2/k-r1"), so that the secret a
// Secret holds is the key an entity has, as the MySQL and RabbitMQ
// models' passwords are: what the controller handles stays opaque to it.
const (
	// CephWorld is the model annotation's value that selects it.
	CephWorld  = "ceph"
	cephBase   = "client.app"
	cephMon    = "mon"
	cephKeySep = "/"
)

func (w *World) ceph() bool { return w.Set.Annotations[Annotation] == CephWorld || w.cephInPlace() }

// cephEntityOf is the entity a key names.
func cephEntityOf(key string) string {
	e, _, _ := strings.Cut(key, cephKeySep)
	return e
}

type cephBackend struct {
	w  *World
	cs *v1.CredentialSet
}

var _ engine.Backend = (*cephBackend)(nil)
var _ engine.Releaser = (*cephBackend)(nil)
var _ engine.Deprovisioner = (*cephBackend)(nil)

func init() {
	registerWorldWith(CephWorld, func(ctx context.Context, cs *v1.CredentialSet, k registry.Kube) (engine.Backend, error) {
		b := &cephBackend{w: active, cs: cs}
		return b, b.trimAtRest(ctx, k) // cephkube's trimPriors (cephpriors.go)
	})
}

func (b *cephBackend) Keys() []string { return cephKeys(b.cs) }

func (b *cephBackend) Traits() engine.Traits { return engine.Traits{ReadBack: true, Overlap: true} }

func (b *cephBackend) NewSecrets(int64) (engine.Secrets, error) {
	return nil, errors.New("ceph mints its own keys (Traits.ReadBack): NewSecrets is never called")
}

func (b *cephBackend) Render(s engine.Secrets) (map[string][]byte, error) {
	out := map[string][]byte{}
	for k, v := range s {
		out[k] = []byte(v)
	}
	return out, nil
}

func (b *cephBackend) Version(context.Context, engine.Secrets) (string, error) { return "20.2.4", nil }

func (b *cephBackend) mon() (*Instance, error) {
	in := b.w.instance(cephMon)
	if in == nil || !in.Present || in.Down {
		return nil, &engine.UnreachableError{Instance: cephMon, Err: errDown}
	}
	return in, nil
}

// generations are base's generation entities, highest first (as the real
// authDump.generations lists them).
func (b *cephBackend) generations(in *Instance, base string) []int64 {
	var out []int64
	for name, a := range in.Users {
		if g, ok := cephGenerationOf(base, name); ok && a.Exists {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] > out[j] })
	return out
}

// cephEntity is client.app's generation g; cephEntityIn, base's.
func cephEntity(g int64) string                { return cephEntityIn(cephBase, g) }
func cephEntityIn(base string, g int64) string { return fmt.Sprintf("%s.%d", base, g) }

// current is the entity and generation secrets name for base, and whether
// the monitor holds exactly that key (holds).
func (b *cephBackend) current(in *Instance, secrets engine.Secrets, base string) (entity string, gen int64, held bool) {
	key := secrets[base]
	entity = cephEntityOf(key)
	gen, _ = cephGenerationOf(base, entity)
	return entity, gen, in.acct(entity).Accepts(key)
}

func (b *cephBackend) notOwned(entity string) error {
	return &engine.Refusal{Reason: string(reason.NotOwned), Message: entity + " is not recorded for this set, so rekey does not change it"}
}

// mint is `ceph auth get-or-create` of base's generation g: an existing
// entity keeps its key (read back), a new one gets a key minted for the
// rotation.
func (b *cephBackend) mint(in *Instance, base string, g int64, step string) string {
	name := cephEntityIn(base, g)
	if a := in.acct(name); a.Exists {
		return a.Primary
	}
	id := b.cs.Status.RotationID
	if id == "" {
		id = fmt.Sprintf("g%d", g)
	}
	in.set(name, Account{Exists: true, Primary: name + cephKeySep + "k-" + id, Marked: true, Minted: true})
	failpoint.Hit(step)
	return in.acct(name).Primary
}

// remove deletes the set's entities named (each must carry its record).
func (b *cephBackend) remove(in *Instance, names []string, step string) error {
	for _, n := range names {
		if !in.acct(n).Marked {
			return b.notOwned(n)
		}
	}
	for _, n := range names {
		delete(in.Users, n)
		failpoint.Hit(step)
	}
	return nil
}

// Provision: an entity the source Secret holds must have that key; a
// missing one adopts its newest generation, else is minted at the
// generation the others have (first everything that exists, so that it is
// known before any is made).
func (b *cephBackend) Provision(_ context.Context, cur engine.Secrets) (engine.Provisioned, error) {
	in, err := b.mon()
	if err != nil {
		return engine.Provisioned{}, err
	}
	out := engine.Secrets{}
	var found int64
	var toMint []string
	for _, base := range b.Keys() {
		if cur[base] != "" {
			entity, gen, held := b.current(in, cur, base)
			if !held {
				return engine.Provisioned{}, mismatchRefusal(entity + " does not hold the key the source Secret holds for it: delete " + base + " from the source Secret and rekey adopts the cluster's key")
			}
			out[base], found = cur[base], max(found, gen)
			continue
		}
		if gens := b.generations(in, base); len(gens) > 0 {
			out[base], found = in.acct(cephEntityIn(base, gens[0])).Primary, max(found, gens[0])
			continue
		}
		toMint = append(toMint, base)
	}
	gen := max(found, 1)
	for _, base := range toMint {
		out[base] = b.mint(in, base, gen, "ceph/generation-created")
	}
	return engine.Provisioned{Secrets: out, Generation: gen}, nil
}

func mismatchRefusal(msg string) error {
	return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: msg}
}

// Precheck: for each entity in turn, the monitor holds the current key,
// and no generation newer than the current one is the set's.
func (b *cephBackend) Precheck(_ context.Context, cur engine.Secrets) error {
	in, err := b.mon()
	if err != nil {
		return err
	}
	for _, base := range b.Keys() {
		entity, gen, held := b.current(in, cur, base)
		if !held {
			return mismatchRefusal(entity + " does not exist in the cluster with the key the source Secret holds for it: restore it (ceph auth import) or delete " + base + " from the source Secret and rekey adopts the cluster's key, then rotate again; the rotation did not start")
		}
		if err := b.newerGeneration(in, base, entity, gen); err != nil {
			return err
		}
	}
	return nil
}

// newerGeneration refuses a generation of base newer than the current
// one (entity, generation gen) recorded for the set.
func (b *cephBackend) newerGeneration(in *Instance, base, entity string, gen int64) error {
	for _, g := range b.generations(in, base) {
		if name := cephEntityIn(base, g); g > gen && in.acct(name).Marked {
			return &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: name + " already has a key beside the current " + entity + ": a generation of this set that the status does not account for (was the status or the source Secret restored from a backup?), which consumers may hold, so nothing was changed: reset the cluster to the source Secret (kubectl rekey recover does this, once the consumers run the current key), then rotate again"}
		}
	}
	return nil
}

// RepairIdle is the backend's upkeep at rest: it reports (KeyMismatch) a
// current key the monitor no longer holds, and (DualPasswordExists, as
// Precheck) a newer generation of the set, entity by entity (one the
// source Secret lacks is being read back); it changes nothing.
func (b *cephBackend) RepairIdle(_ context.Context, cur engine.Secrets) error {
	in, err := b.mon()
	if err != nil {
		return err
	}
	for _, base := range b.Keys() {
		if cur[base] == "" {
			continue
		}
		entity, gen, held := b.current(in, cur, base)
		if !held {
			return mismatchRefusal("the cluster's key for " + entity + " is not the one the source Secret holds (changed outside rekey): delete " + base + " from the source Secret and rekey " + idleThen)
		}
		if err := b.newerGeneration(in, base, entity, gen); err != nil {
			return err
		}
	}
	return nil
}

// takeResetKey is the way out the backend's reset names (ceph's
// takeResetKey): every entity's pending key named, since the read back
// waits for none to be left.
func takeResetKey(base string, bases []string) string {
	return "To take the cluster's key, delete " + base + " from the source Secret (with " + pendingKeys(bases) + ", if it holds them): rekey reads the key back, restarts the consumers onto it, and the reset keeps it"
}

// pendingKeys is ceph's pendingKeys: "a_PENDING, b_PENDING and ROTATION_ID".
func pendingKeys(bases []string) string {
	var names []string
	for _, b := range bases {
		names = append(names, engine.PendingKey(b))
	}
	return strings.Join(names, ", ") + " and " + engine.RotationIDKey
}

// idleThen is what a KeyMismatch found at rest says rekey does next.
const idleThen = "adopts the cluster's key and restarts the consumers onto it; rekey changed nothing"

// Apply is applyOverlapping, entity by entity: generation gen's entity
// beside the current one (read back if it exists), the newer ones nobody
// stored removed.
func (b *cephBackend) Apply(_ context.Context, cur, _ engine.Secrets, gen int64) (engine.Secrets, error) {
	in, err := b.mon()
	if err != nil {
		return nil, err
	}
	out := engine.Secrets{}
	for _, base := range b.Keys() {
		_, curGen, _ := b.current(in, cur, base)
		if gen <= curGen {
			return nil, fmt.Errorf("generation %d is not newer than %s's current generation %d", gen, base, curGen)
		}
		var orphans []string
		for _, g := range b.generations(in, base) {
			if g > curGen && g != gen {
				orphans = append(orphans, cephEntityIn(base, g))
			}
		}
		if err := b.remove(in, orphans, "rotate/ceph-orphan-removed"); err != nil {
			return nil, err
		}
		if a := in.acct(cephEntityIn(base, gen)); a.Exists && !a.Marked {
			return nil, b.notOwned(cephEntityIn(base, gen))
		}
		out[base] = b.mint(in, base, gen, "ceph/generation-created")
	}
	return out, nil
}

// verify is verifyPending: the monitor authenticates each key.
func (b *cephBackend) verify(in *Instance, secrets engine.Secrets) error {
	for _, base := range b.Keys() {
		if entity, _, held := b.current(in, secrets, base); !held {
			return &engine.Refusal{Reason: string(reason.PendingRejected), Message: "the cluster refuses the key the source Secret holds for " + base + " (" + entity + ": changed outside rekey), so rekey changed nothing. Find who changed it; " + takeClusterKey(base, b.Keys())}
		}
	}
	return nil
}

// takeClusterKey is the way out the backend's refusals of a key changed
// outside rekey name (ceph's takeClusterKey).
func takeClusterKey(base string, bases []string) string {
	return "to take the cluster's key: during a rotation (phase Rotating or Distributed) delete " + engine.PendingKey(base) + " from the source Secret; otherwise delete " + base + " from the source Secret (with " + pendingKeys(bases) + ", if it holds them); rekey reads the key back and restarts the consumers onto it"
}

// Retire removes, of every entity, the generations older than the pending
// one beyond the keepPriorKeyCount just below it (cephpriors.go), all or
// none, once every pending key authenticates.
func (b *cephBackend) Retire(_ context.Context, _, pending engine.Secrets) error {
	in, err := b.mon()
	if err != nil {
		return err
	}
	if err := b.verify(in, pending); err != nil {
		return err
	}
	return b.remove(in, b.priorsBeyond(in, pending), "ceph/prior-removed")
}

// Reset is resetOverlapping: every current key must still work; every
// newer generation goes (each checked for its record before any goes).
func (b *cephBackend) Reset(_ context.Context, cur engine.Secrets) error {
	in, err := b.mon()
	if err != nil {
		return err
	}
	var doomed []string
	for _, base := range b.Keys() {
		entity, gen, held := b.current(in, cur, base)
		if !held {
			return mismatchRefusal("the cluster no longer has the current key of " + base + " (" + entity + ": changed outside rekey), so resetting to it would lock its consumers out; nothing was deleted. " + takeResetKey(base, b.Keys()))
		}
		for _, g := range b.generations(in, base) {
			if name := cephEntityIn(base, g); g > gen {
				if !in.acct(name).Marked {
					return b.notOwned(name)
				}
				doomed = append(doomed, name)
			}
		}
	}
	failpoint.Hit("reset/ceph-generations-doomed")
	return b.remove(in, doomed, "reset/ceph-generation-removed")
}

func (b *cephBackend) Verify(_ context.Context, s engine.Secrets) error {
	in, err := b.mon()
	if err != nil {
		return err
	}
	return b.verify(in, s)
}

func (b *cephBackend) Release(_ context.Context, cur engine.Secrets) error {
	return b.wind(cur, false)
}

func (b *cephBackend) Deprovision(_ context.Context, cur engine.Secrets) error {
	return b.wind(cur, true)
}
