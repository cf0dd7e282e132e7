package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// errStale marks a write refused because the set moved on since it was
// read: the expected outcome of a race, retried with a fresh read.
var errStale = errors.New("stale read")

// casStatus writes the status mutate produces, only if the status is still
// exactly what cs says: a JSON Patch "test" of the whole status makes a
// write computed from a stale read fail (errStale; the reconcile starts
// over from a fresh read) instead of taking the set back a step — a
// manager that stalled past its lease and wakes with what it read before
// included. The whole status, not a few fields: every field a write
// carries was computed from the read, and only rekey's manager writes
// status (an admission policy refuses everyone else), so a difference is
// always another write of rekey's.
func (r *Reconciler) casStatus(ctx context.Context, cs *v1.CredentialSet, mutate func(*v1.CredentialSetStatus)) error {
	next := *cs.Status.DeepCopy()
	mutate(&next)
	next.ObservedGeneration = cs.Generation
	// The step is derived, never decided here: every write carries the
	// one its other fields say.
	next.Step = engine.StepOf(next)
	if next.Phase != cs.Status.Phase || next.RotationID != cs.Status.RotationID {
		// A transition succeeded: no problem stands in its way now (one
		// that does is set again by this reconcile's observe).
		setPhaseConditions(&next, cs.Generation, nil)
	}
	if cs.Status.Phase == "" {
		// First write: the fields the test ops compare do not exist yet, so
		// fall back to optimistic locking on resourceVersion. The whole
		// status is sent, empty rotationID included, so later tests find it.
		body, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": cs.ResourceVersion},
			"status":   next,
		})
		if err != nil {
			return err
		}
		if err := r.Client.Status().Patch(ctx, cs, client.RawPatch(types.MergePatchType, body)); err != nil {
			return err
		}
		noteServerView(ctx, cs)
		return nil
	}
	ops := []map[string]any{
		{"op": "test", "path": "/status", "value": cs.Status},
		notDeletedSince(cs),
		{"op": "replace", "path": "/status", "value": next},
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := r.Client.Status().Patch(ctx, cs, client.RawPatch(types.JSONPatchType, body)); err != nil {
		if testOpFailed(err) || apierrors.IsConflict(err) {
			return fmt.Errorf("%w: %s left phase %s of rotation %q: %v", errStale, cs.Name, cs.Status.Phase, cs.Status.RotationID, err)
		}
		// Any other refusal (a validation failure, an admission policy) is
		// not a race: retrying at once would fail the same way.
		return err
	}
	noteServerView(ctx, cs)
	return nil
}

// notDeletedSince is the JSON Patch "test" op that holds only while the
// set's deletion is as cs read it: not begun (a test of null passes on a
// missing member), or begun at the same instant. The status alone can
// come back to what a copy holds (a restore from backup puts an older one
// back), but a deletion is never undone: a copy read before it must not
// write what it decided for a set that lives (a recovery owed by a set
// whose wind-down already released its logins).
func notDeletedSince(cs *v1.CredentialSet) map[string]any {
	return map[string]any{"op": "test", "path": "/metadata/deletionTimestamp", "value": cs.DeletionTimestamp}
}

// confirmStatus fails with errStale unless the set's status on the server
// is still exactly cs's: a JSON Patch holding only a "test" op, which the
// API server applies without writing anything (no new resourceVersion, no
// watch event) when it holds.
func (r *Reconciler) confirmStatus(ctx context.Context, cs *v1.CredentialSet) error {
	if cs.Status.Phase == "" {
		return nil // never written: nothing to have moved past
	}
	body, err := json.Marshal([]map[string]any{{"op": "test", "path": "/status", "value": cs.Status}, notDeletedSince(cs)})
	if err != nil {
		return err
	}
	err = r.Client.Status().Patch(ctx, cs.DeepCopy(), client.RawPatch(types.JSONPatchType, body))
	if testOpFailed(err) || apierrors.IsConflict(err) {
		return fmt.Errorf("%w: %s left phase %s of rotation %q since it was read: %v", errStale, cs.Name, cs.Status.Phase, cs.Status.RotationID, err)
	}
	return err
}

// dropAnnotations removes trigger annotations, best effort: status is the truth, a leftover is recognised as
// stale next time. Each is removed only if it still holds the value this
// reconcile read (a JSON Patch "test"): a request written meanwhile — a
// new discard over a stale one — is a new request, and must survive.
func (r *Reconciler) dropAnnotations(ctx context.Context, cs *v1.CredentialSet, keys ...string) {
	for _, k := range keys {
		v, ok := cs.Annotations[k]
		if !ok {
			continue
		}
		path := "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
		body, _ := json.Marshal([]map[string]any{
			{"op": "test", "path": path, "value": v},
			{"op": "remove", "path": path},
		})
		err := r.Client.Patch(ctx, cs.DeepCopy(), client.RawPatch(types.JSONPatchType, body))
		switch {
		case err == nil:
		case testOpFailed(err) || apierrors.IsNotFound(err):
			// Changed or removed since it was read: the change
			// brings its own reconcile.
		default:
			logFrom(ctx).Info("annotation removal failed; it will be recognised as stale", "annotation", k, "error", err.Error())
		}
	}
}

// testOpFailed: the server refused one of rekey's JSON Patches because it
// could not apply it — for casStatus's and dropAnnotations' patches, a
// "test" op that did not hold: the object moved on since it was read, the
// expected outcome of a race. The API server answers a patch that does not
// apply with a bare 422 (apiserver's patch.go: NewGenericServerResponse,
// no kind, no name, no causes). Every other 422 — a validation failure
// such as an oversized condition message (NewInvalid: the kind and a cause
// per field), an admission policy (its message as a cause) — is a real
// refusal that a retry would meet again.
func testOpFailed(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d != nil && d.Kind == "" && d.Name == "" && len(d.Causes) == 0
}
