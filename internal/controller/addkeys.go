package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// addIdentities provisions the identities the spec lists and the source
// Secret has no current secret for (missing), as engine.DecideAdd says: a
// user added to the spec of a provisioned set. Like provision, a secret is
// stored before any instance learns it, under its AddingKey: it becomes
// current, and so reaches the consumers, only once every instance accepts
// it. A crash in between leaves it staged, and the next reconcile uses it
// again. A key lost from the source Secret for an identity that exists
// takes the same way and is refused by Provision (the identity refuses the
// staged secret), with nothing served. nil: t.src now holds a current
// secret for every key. cur are the current secrets of the other keys.
func (r *Reconciler) addIdentities(ctx context.Context, t *turn, cur engine.Secrets, missing []string) (*problem, error) {
	cs, keys := t.cs, t.p.backend.Keys()
	name := naming.SourceSecretName(cs)
	present := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return slices.Contains(missing, k) })
	pending := engine.InspectPending(t.src.Data, present, cs.Status.RotationID)
	switch engine.DecideAdd(cs.Status, pending, t.p.backend.Traits(), engine.CurrentCount(t.src.Data)) {
	case engine.AddReadBack:
		return r.readBack(ctx, t, cur, missing)
	case engine.AddLost:
		return &problem{reason.MissingRotationPending, fmt.Sprintf(
			"source Secret %s/%s lacks current secrets %v; restore them from backup", r.Namespace, name, missing)}, nil
	case engine.AddUnsupported:
		if t.p.backend.Traits().ReadBack {
			// Not a spec problem: the keys are read back once the set is
			// at rest, and an overlapping backend's pending keys may be
			// valid beside the current ones, so none may be left.
			return &problem{reason.MissingRotationPending, fmt.Sprintf(
				"source Secret %s/%s lacks current secrets %v, which rekey reads back from the backend only with no rotation, reset or discard under way and no pending secret left in the source Secret (step %s); nothing was changed. Outside a rotation (a rollback's reset still owed included), delete the pending secrets (%s) and %s from the source Secret too; during one, restore the lost secrets from a backup", r.Namespace, name, missing, engine.StepOf(cs.Status), strings.Join(pendingNames(keys), ", "), engine.RotationIDKey)}, nil
		}
		return &problem{reason.InvalidSpec, fmt.Sprintf(
			"the spec lists identities the set was not provisioned with (source Secret keys %v), and this backend adds identities only when a set is first provisioned; nothing was changed: give them a CredentialSet of their own, or remove them from the spec", missing)}, nil
	case engine.AddInFlight:
		if n, ok := t.p.backend.(engine.Narrower); ok {
			if b, ok := n.Without(missing); ok {
				// Added once the rotation or rollback ended.
				t.p.backend = b
				return nil, nil
			}
		}
		return &problem{reason.InvalidSpec, fmt.Sprintf(
			"the spec lists identities the set was not provisioned with (source Secret keys %v), and rekey adds an identity only while no rotation or rollback is under way (step %s); nothing was changed, and until they are removed from the spec the set does not move: remove them, let the rotation complete (or abort it), then list them again", missing, engine.StepOf(cs.Status))}, nil
	}

	staged, err := r.stageAdded(ctx, t, missing)
	if err != nil {
		return nil, err
	}
	cur = maps.Clone(cur)
	maps.Copy(cur, staged)
	if err := r.fence(ctx); err != nil {
		return nil, err
	}
	if _, err := t.p.backend.Provision(ctx, cur); err != nil {
		if prob := classify(err); prob != nil {
			prob.message = fmt.Sprintf("provisioning %v, which the spec lists and the source Secret holds no current secret for: %s; until then the set does not move (remove them from the spec to go on without them)", missing, prob.message)
			return prob, nil
		}
		return nil, err
	}
	failpoint.Hit("add/provisioned")
	next := maps.Clone(t.src.Data)
	for k, v := range staged {
		next[k] = []byte(v)
		delete(next, engine.AddingKey(k))
	}
	if t.src, err = r.writeSourceSecret(ctx, cs, t.src, next); err != nil {
		return nil, err
	}
	r.event(cs, "Normal", reason.Provisioned, "Provision", "%s added to the spec: provisioned on every instance at generation %d (step %s)",
		strings.Join(slices.Sorted(maps.Keys(staged)), ", "), cs.Status.KeyGeneration, engine.StepOf(cs.Status))
	return nil, nil
}

// stageAdded stores a secret for each of missing under its AddingKey,
// keeping one a previous reconcile staged, and returns them by key.
func (r *Reconciler) stageAdded(ctx context.Context, t *turn, missing []string) (engine.Secrets, error) {
	staged, need := engine.Secrets{}, []string{}
	for _, k := range missing {
		v := string(t.src.Data[engine.AddingKey(k)])
		// Restaged when none is, or when adopted since (the fix a
		// refusal names).
		if a, adopted := t.p.adopt[k]; v == "" || adopted && a != v {
			need = append(need, k)
		} else {
			staged[k] = v
		}
	}
	if len(need) == 0 {
		return staged, nil
	}
	fresh, err := t.p.backend.NewSecrets(t.cs.Status.KeyGeneration)
	if err != nil {
		return nil, err
	}
	next := maps.Clone(t.src.Data)
	for _, k := range need {
		v, ok := t.p.adopt[k]
		if !ok {
			v = fresh[k]
		}
		staged[k] = v
		next[engine.AddingKey(k)] = []byte(v)
	}
	if t.src, err = r.writeSourceSecret(ctx, t.cs, t.src, next); err != nil {
		return nil, err
	}
	failpoint.Hit("add/staged")
	return staged, nil
}

// readBack takes the keys the source Secret lacks from a backend that
// hands its keys back (engine.AddReadBack): Provision adopts what the
// backend holds and mints what exists nowhere. The backend's key may not
// be the one the consumers were given (a person deleted it from the source
// Secret so that rekey adopts the cluster's, as a KeyMismatch refusal
// says), so they restart onto it. The restart is recorded before the
// source Secret is written: a crash in between reads back the same keys
// and keeps the same restart.
func (r *Reconciler) readBack(ctx context.Context, t *turn, cur engine.Secrets, missing []string) (*problem, error) {
	cs := t.cs
	if err := r.fence(ctx); err != nil {
		return nil, err
	}
	got, err := t.p.backend.Provision(ctx, cur)
	if err != nil {
		if prob := classify(err); prob != nil {
			prob.message = fmt.Sprintf("reading back %v, which the source Secret holds no current secret for: %s", missing, prob.message)
			return prob, nil
		}
		return nil, err
	}
	// Pending secrets at rest (DecideAdd lets only an in-place backend
	// have them here) are the key now read back, or a dead one.
	next := engine.WithoutPending(t.src.Data, t.p.backend.Keys())
	for _, k := range missing {
		v, ok := got.Secrets[k]
		if !ok || v == "" {
			return nil, fmt.Errorf("provisioning read back no secret for %s", k)
		}
		next[k] = []byte(v)
	}
	// A key read back may be of a generation newer than the set's (a
	// rotation's, its status restored from before it): the set's
	// generation follows, or the next rotation would mint one that is not
	// newer than that key's.
	gen := max(cs.Status.KeyGeneration, got.Generation)
	if id := engine.AdoptRestartID(t.src.ResourceVersion); cs.Status.RestartID != id || cs.Status.KeyGeneration != gen {
		if err := r.writeStatus(ctx, t, func(st *v1.CredentialSetStatus) { st.RestartID, st.KeyGeneration = id, gen }); err != nil {
			return nil, err
		}
		failpoint.Hit("add/restart-recorded")
	}
	if t.src, err = r.writeSourceSecret(ctx, cs, t.src, next); err != nil {
		return nil, err
	}
	r.event(cs, "Normal", reason.Provisioned, "Provision", "%s read back from the backend, as the source Secret held no current secret for them: the consumers restart onto them (step %s)",
		strings.Join(missing, ", "), engine.StepOf(cs.Status))
	return nil, nil
}

// pendingNames are keys' pending secrets' names in the source Secret.
func pendingNames(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = engine.PendingKey(k)
	}
	return out
}
