package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/naming"
)

// envtest runs no namespace controller: a set a test leaves behind would be
// reconciled by every later test's manager, against a server long stopped
// (or, worse, one that reuses its port), for the rest of the run. So every
// test namespace's CredentialSets are deleted when its test ends, while the
// test's servers, and usually its manager, still run.

// finalizeBound is how long a running manager is given to run a deleted
// set's finalizer (deprovisioning a RabbitMQ set deletes its users, a few
// calls to the broker) before the test removes the finalizers itself.
const finalizeBound = time.Minute

// liveManagers counts the managers running now against each API server
// (by address): a set's finalizer runs only while one does.
var liveManagers = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

// managerRunning records a manager running against host until the
// returned function is called.
func managerRunning(host string) (stopped func()) {
	liveManagers.Lock()
	liveManagers.n[host]++
	liveManagers.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			liveManagers.Lock()
			liveManagers.n[host]--
			liveManagers.Unlock()
		})
	}
}

func managersOn(host string) int {
	liveManagers.Lock()
	defer liveManagers.Unlock()
	return liveManagers.n[host]
}

// deleteSetsAtEnd deletes every CredentialSet in ns when the test ends
// and waits until they are gone. A running manager finalizes them as a
// user's deletion would; the consumers' finalizers are removed first, as a
// user removing the consumers would (a consumer group holds its set until
// then, by design). What is still there after finalizeBound, or at once
// when no manager runs, loses its finalizers: its backend may be stopped
// already, and a set must not outlive its test.
func deleteSetsAtEnd(t testing.TB, c client.Client, host, ns string) {
	t.Cleanup(func() {
		ctx := context.Background()
		var list v1.CredentialSetList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Errorf("cleanup: list the sets of %s: %v", ns, err)
			return
		}
		if len(list.Items) == 0 {
			return
		}
		for i := range list.Items {
			cs := &list.Items[i]
			keepForScan(host, cs)
			setCleanupPolicy(c, cs)
			if err := c.Delete(ctx, cs); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleanup: delete %s/%s: %v", ns, cs.Name, err)
			}
		}
		bound := time.Duration(0)
		if managersOn(host) > 0 {
			bound = finalizeBound
		}
		left := waitSetsGone(c, ns, bound, dropConsumerFinalizers)
		if len(left) == 0 {
			return
		}
		why := "no manager runs to finalize them"
		if bound > 0 {
			why = "not finalized in " + bound.String() + " (a backend that no longer answers?)"
		}
		t.Logf("cleanup: %s: removing the finalizers of %s", why, strings.Join(left, ", "))
		if left = waitSetsGone(c, ns, 30*time.Second, dropAllFinalizers); len(left) > 0 {
			t.Errorf("cleanup: sets %s still exist after their finalizers were removed", strings.Join(left, ", "))
		}
	})
}

// setCleanupPolicy picks how a test's set is deleted at its end: the users
// and roles of RabbitMQ and PostgreSQL sets are deleted (as before sets had
// a deletion policy: later tests on the same broker or server must not find
// them); other sets, and any set with a rotation in flight (which would
// otherwise finish first), are let go as they are. Tests of the policies
// themselves delete their sets before this runs.
func setCleanupPolicy(c client.Client, cs *v1.CredentialSet) {
	want := v1.DeletionRetain
	st := cs.Status
	idle := st.Phase != v1.PhaseRotating && st.Phase != v1.PhaseDistributed && !st.ResetPending
	if idle && (cs.Spec.RabbitMQ != nil || cs.Spec.Postgres != nil) {
		want = v1.DeletionDelete
	}
	if cs.Spec.DeletionPolicy == want {
		return
	}
	body, _ := json.Marshal(map[string]any{"spec": map[string]any{"deletionPolicy": want}})
	_ = c.Patch(context.Background(), cs, client.RawPatch(types.MergePatchType, body))
}

// waitSetsGone polls until ns holds no set or bound passed, applying edit
// to each set still there at every poll (once at least), and returns the
// names of those left.
func waitSetsGone(c client.Client, ns string, bound time.Duration, edit func(client.Client, *v1.CredentialSet)) []string {
	deadline := time.Now().Add(bound)
	for {
		var list v1.CredentialSetList
		if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return []string{err.Error()}
		}
		var left []string
		for i := range list.Items {
			edit(c, &list.Items[i])
			left = append(left, list.Items[i].Name)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func dropConsumerFinalizers(c client.Client, cs *v1.CredentialSet) {
	keep := slices.DeleteFunc(slices.Clone(cs.Finalizers), func(f string) bool {
		return strings.HasPrefix(f, naming.ConsumerFinalizerPrefix)
	})
	if len(keep) != len(cs.Finalizers) {
		patchFinalizers(c, cs, keep)
	}
}

func dropAllFinalizers(c client.Client, cs *v1.CredentialSet) {
	if len(cs.Finalizers) > 0 {
		patchFinalizers(c, cs, nil)
	}
}

// patchFinalizers sets the finalizers of the version read; a conflict
// with the manager's own write is tried again at the next poll.
func patchFinalizers(c client.Client, cs *v1.CredentialSet, finalizers []string) {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": cs.ResourceVersion, "finalizers": finalizers}})
	_ = c.Patch(context.Background(), cs, client.RawPatch(types.MergePatchType, body))
}
