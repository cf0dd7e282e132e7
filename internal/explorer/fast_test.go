package explorer

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// TestFastPathsExploreTheSame explores worlds whose patches meet every
// case setPatch tells apart (stale reads whose tests fail, restores,
// deletions, crashes between writes, two sets) with setPatch and Clone's
// deep copies (fastPatches, fastClones) and without them: every state reached, every transition's label and the
// state it leads to (its Warnings and DeletionWaiting events included),
// and every state's invariant verdict are the same; and every clone is
// deeply equal to the decoding of the state's JSON.
func TestFastPathsExploreTheSame(t *testing.T) {
	worlds := []struct {
		o     Options
		depth int
	}{
		{Options{Instances: []string{"i0", "i1"}, StaleReads: true, Crashes: true, Backups: true,
			Only: []string{"user: rotate r1", "user: discard (active", "user: abort (active", "consumer", "status"}}, 3},
		{Options{Instances: []string{"i0", "i1"}, Crashes: true, Deletion: true, PolicyEdits: true,
			Only: []string{"user: rotate r1", "user: discard (active", "user: delete", "user: set deletionPolicy", "consumer"}}, 4},
		{Options{CephAdmin: true, Crashes: true, Backups: true, Deletion: true, StaleReads: true, Only: backendOnly("mon")}, 3},
		{Options{Instances: []string{"i0"}, TwoSets: true, Crashes: true, Only: []string{"user: rotate r1", "user: discard (active", "consumer", "db2"}}, 2},
	}
	defer func() { fastPatches, fastClones = true, true }()
	for i, w := range worlds {
		var digests [2]string
		for j, fast := range []bool{false, true} {
			fastPatches, fastClones = fast, fast
			digests[j] = exploreDigest(t, w.o, w.depth)
		}
		if digests[0] != digests[1] {
			t.Errorf("world %d: explored differently with setPatch and clones", i)
		}
	}
}

// exploreDigest explores o breadth first to depth, every state once, and
// digests what it met.
func exploreDigest(t *testing.T, o Options, depth int) string {
	t.Helper()
	start, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	saved := drained
	drained = map[string]bool{} // what a drain found must not carry over
	defer func() { drained = saved }()
	answered := setPatches
	h := sha256.New()
	seen := map[string]bool{start.Hash(): true}
	frontier, states := []*World{start}, 1
	for d := 0; d < depth; d++ {
		var next []*World
		for _, w := range frontier {
			if fastClones {
				a, b := w.Clone(), w.Clone() // the second, a deep copy of the first's decoding
				fastClones = false
				c := w.Clone()
				fastClones = true
				if !reflect.DeepEqual(a, c) || !reflect.DeepEqual(b, c) {
					t.Errorf("a clone is not the decoding of the state's JSON: %s", w.Summary())
				}
			}
			for _, s := range Successors(w, o) {
				sh := s.World.Hash()
				fmt.Fprintf(h, "%s|%s|%q|%q\n", s.Label, sh, s.World.Warnings, s.World.Waiting)
				if seen[sh] {
					continue
				}
				seen[sh] = true
				states++
				inv, detail := check(s.World, &Report{})
				fmt.Fprintf(h, "check %s %s\n", inv, detail)
				next = append(next, s.World)
			}
		}
		frontier = next
	}
	t.Logf("%d states, %d patches answered by setPatch", states, setPatches-answered)
	if fastPatches && setPatches == answered {
		t.Error("setPatch answered no patch")
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestSetPatchIsTheFakeClients makes each patch setPatch answers, and
// each it hands back, on two fake API servers holding the same set, one
// answering with setPatch and one without: the error, the object handed
// back and the set stored after (its resourceVersion included) are the
// same.
func TestSetPatchIsTheFakeClients(t *testing.T) {
	w, err := Start(Options{Instances: []string{"i0"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Set.Annotations[engine.RotateAnnotation] = "r1"
	deleted := w.Clone()
	deleted.Set.DeletionTimestamp = &metav1.Time{Time: now}
	deleted.Set.Finalizers = []string{"rekey.io/test"}
	ops := func(o ...map[string]any) []byte {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	test := func(path string, v any) map[string]any { return map[string]any{"op": "test", "path": path, "value": v} }
	path := "/metadata/annotations/" + strings.ReplaceAll(engine.RotateAnnotation, "/", "~1")
	for _, w := range []*World{w, deleted} {
		st := w.Set.Status
		next, stale := *st.DeepCopy(), *st.DeepCopy()
		next.Phase, next.RotationID = v1.PhaseRotating, "r1"
		next.Conditions = append(next.Conditions, metav1.Condition{Type: "Test", Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Time{Time: now}})
		stale.Phase = v1.PhaseDistributed
		dt := test("/metadata/deletionTimestamp", w.Set.DeletionTimestamp)
		for _, c := range []struct {
			name   string
			status bool
			body   []byte
		}{
			{"casStatus", true, ops(test("/status", st), dt, map[string]any{"op": "replace", "path": "/status", "value": next})},
			{"casStatus from a stale read", true, ops(test("/status", stale), dt, map[string]any{"op": "replace", "path": "/status", "value": next})},
			{"confirmStatus", true, ops(test("/status", st), dt)},
			{"confirmStatus, deletion not seen", true, ops(test("/status", st), test("/metadata/deletionTimestamp", nil))},
			{"dropAnnotations", false, ops(test(path, "r1"), map[string]any{"op": "remove", "path": path})},
			{"dropAnnotations, changed since", false, ops(test(path, "r0"), map[string]any{"op": "remove", "path": path})},
		} {
			var got [2]string
			for i, fast := range []bool{false, true} {
				fastPatches = fast
				answered := setPatches
				kc := w.kube()
				obj := w.Set.DeepCopy()
				var err error
				if c.status {
					err = kc.Status().Patch(context.Background(), obj, client.RawPatch(types.JSONPatchType, c.body))
				} else {
					err = kc.Patch(context.Background(), obj, client.RawPatch(types.JSONPatchType, c.body))
				}
				stored := &v1.CredentialSet{}
				gerr := kc.Get(context.Background(), client.ObjectKeyFromObject(obj), stored)
				b, _ := json.Marshal(obj)
				s, _ := json.Marshal(stored)
				got[i] = fmt.Sprintf("error %v\nhanded back %s\nstored %s (%v)", err, b, s, gerr)
				if fast && setPatches == answered && !strings.Contains(c.name, "stale") && !strings.Contains(c.name, "not seen") && !strings.Contains(c.name, "changed") {
					t.Errorf("%s: setPatch did not answer it", c.name)
				}
			}
			fastPatches = true
			if got[0] != got[1] {
				t.Errorf("%s (deleted %v): the fake client's path\n%s\nsetPatch\n%s", c.name, w.deleted(), got[0], got[1])
			}
		}
	}
}
