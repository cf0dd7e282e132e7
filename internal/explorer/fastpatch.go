package explorer

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// fastPatches: the fake API server answers the controller's JSON Patches
// on the set (casStatus's, confirmStatus's, dropAnnotations') by setPatch
// when their "test" ops hold; off, every patch takes the fake client's own
// path (TestFastPathsExploreTheSame explores both ways).
var fastPatches = true

// setPatches counts the patches setPatch answered (a test's proof that
// it did).
var setPatches int

// setGVK is the CredentialSet's kind and the resource the fake client's
// tracker keeps it under (as its getGVRFromObject guesses it).
var (
	setGVK    = v1.GroupVersion.WithKind("CredentialSet")
	setGVR, _ = meta.UnsafeGuessKindToResource(setGVK)
)

// patchOp is one JSON Patch operation; Value is its raw JSON (empty when
// absent).
type patchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

// setPatch answers two shapes of JSON Patch on a CredentialSet when
// every "test" op in it holds: on its status (status true), "test" ops on
// /status and /metadata/deletionTimestamp, then at most one "replace" of
// /status (casStatus's and confirmStatus's); on the set itself, a "test"
// of one annotation then its "remove" (dropAnnotations'). The fake client
// applies each JSON Patch twice (a dry run, then for real) to the whole
// object's JSON, compares tested values node by node, reads its own stack
// (debug.Stack) on every patch to tell a status patch, and writes through
// updateObject, which round-trips the object through JSON and maps twice:
// most of a reconcile's CPU. Here a test holds when its value's JSON is
// byte for byte what the fake client's document holds there (json.Marshal
// of the stored object's field, as the fake client marshals the object
// before patching; equal bytes are equal JSON); the stored set gets the
// replaced status or loses the annotation, and what updateObject does to
// a write that keeps the resourceVersion read (a JSON Patch's) on a set
// that stays: the resourceVersion goes up by one, nothing else changes;
// obj receives the result as the patch path hands it back.
// TestSetPatchIsTheFakeClients holds each outcome to the fake client's.
// handled is false, with nothing written, for any other patch, any test
// that does not hold by bytes (a stale read: the fake client's path
// refuses it, asServer makes that the API server's 422), and a set the
// write would remove (deleted, no finalizers): the fake client's own path
// then answers it, exactly as without this.
func setPatch(ctx context.Context, c client.Client, tracker clienttesting.ObjectTracker, obj client.Object, p client.Patch, opts int, status bool) (handled bool, err error) {
	if !fastPatches || opts != 0 || p.Type() != types.JSONPatchType {
		return false, nil
	}
	if _, ok := obj.(*v1.CredentialSet); !ok {
		return false, nil
	}
	data, err := p.Data(obj)
	if err != nil {
		return false, nil
	}
	var ops []patchOp
	if err := json.Unmarshal(data, &ops); err != nil || len(ops) == 0 {
		return false, nil
	}
	stored, err := tracker.Get(setGVR, obj.GetNamespace(), obj.GetName())
	if err != nil {
		return false, nil
	}
	cur, ok := stored.(*v1.CredentialSet)
	if !ok || !cur.DeletionTimestamp.IsZero() && len(cur.Finalizers) == 0 {
		return false, nil
	}
	if status {
		ok = casOps(cur, ops)
	} else {
		ok = dropOps(cur, ops)
	}
	rv, err := strconv.ParseUint(cur.ResourceVersion, 10, 64)
	if !ok || err != nil {
		return false, nil
	}
	cur.ResourceVersion = strconv.FormatUint(rv+1, 10)
	if err := tracker.Update(setGVR, cur, cur.Namespace); err != nil {
		return false, nil // nothing written
	}
	setPatches++
	// As the fake client's patch hands the patched object back.
	cur.SetGroupVersionKind(setGVK)
	j, err := json.Marshal(cur)
	if err != nil {
		return true, err
	}
	zeroed := reflect.ValueOf(obj).Elem()
	zeroed.Set(reflect.Zero(zeroed.Type()))
	if err := utiljson.Unmarshal(j, obj); err != nil {
		return true, err
	}
	obj.SetManagedFields(nil)
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return true, nil
}

// holds: the test op's value is byte for byte v's JSON.
func holds(op patchOp, v any) bool {
	b, err := json.Marshal(v)
	return err == nil && op.Op == "test" && len(op.Value) > 0 && bytes.Equal(b, op.Value)
}

// casOps applies casStatus's (or confirmStatus's) ops to cur, if they are
// those and their tests hold.
func casOps(cur *v1.CredentialSet, ops []patchOp) bool {
	next := cur.Status
	for i, op := range ops {
		switch {
		case op.Path == "/status" && holds(op, cur.Status):
		case op.Path == "/metadata/deletionTimestamp" && holds(op, cur.DeletionTimestamp):
		case op.Op == "replace" && op.Path == "/status" && i == len(ops)-1 && len(op.Value) > 0:
			next = v1.CredentialSetStatus{}
			if utiljson.Unmarshal(op.Value, &next) != nil {
				return false
			}
		default:
			return false
		}
	}
	cur.Status = next
	return true
}

// pointerToken unescapes a JSON Pointer's reference token (RFC 6901), as
// json-patch's decodePatchKey does.
var pointerToken = strings.NewReplacer("~1", "/", "~0", "~")

// dropOps applies dropAnnotations' ops to cur, if they are those and
// the annotation holds the value tested.
func dropOps(cur *v1.CredentialSet, ops []patchOp) bool {
	const prefix = "/metadata/annotations/"
	if len(ops) != 2 || ops[1].Op != "remove" || ops[1].Path != ops[0].Path || len(ops[1].Value) > 0 || !strings.HasPrefix(ops[0].Path, prefix) {
		return false
	}
	k := strings.TrimPrefix(ops[0].Path, prefix)
	if strings.Contains(k, "/") {
		return false // a path below an annotation
	}
	k = pointerToken.Replace(k)
	v, ok := cur.Annotations[k]
	if !ok || !holds(ops[0], v) {
		return false
	}
	delete(cur.Annotations, k)
	return true
}
