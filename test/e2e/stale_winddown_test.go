package e2e

import (
	"context"
	"maps"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestStaleWindDown: a manager that reads a deleted set from a cache that
// lags (a new leader's) must not wind it down on that old copy. On a real
// API server and a real primary and replica: a set whose status and source
// Secret were restored from before a rotation is deleted and held
// (DualPasswordExists); recover restarts its consumer pods and resets the
// instances, and the manager is killed right after the reset (so the set
// still records it owes the end of its recovery). A manager whose reads of
// the set return the copy from before the recovery then reconciles it:
// that copy shows nothing left to hold the deletion, so its wind-down
// would release the users and empty the source Secret, and the set would
// wait forever for the current secrets its recovery needs (the explorer's
// path, TestPathStaleWindDown). The API server refuses its no-op patch
// conditional on that copy's resourceVersion, so nothing is changed; a
// manager then completes the recovery and the wind-down, and no pod login
// is refused.
func TestStaleWindDown(t *testing.T) {
	// As twoUserSet, without its in-process manager: the one manager
	// before the reset is the process killed at it.
	c := matrixCluster(t, testenv.MySQLOptions{Replicas: 1})
	prepareAdmin(t, c.Instances(), "ops-admin", opsAdminPassword)
	ns := newNamespace(t)
	set := preparedAdminSet(t, ns, "stale", c)
	set.Spec.MySQL.Users = append(set.Spec.MySQL.Users, v1.MySQLUser{Name: "stale2"})
	keys := map[string]string{"STALE_PASSWORD": "stale", "STALE2_PASSWORD": "stale2"}
	pc := deployConsumers(t, set, keys, c.Instances)
	mp := startManagerProcess(t, "reset/backend-reset")
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "stale", v1.PhaseIdle, 1)
	backupStatus, backupSource := *cs.Status.DeepCopy(), maps.Clone(sourceData(t, cs))
	cur := userPasswords(backupSource, keys, "")
	rotate(t, ns, "stale", "r1")
	waitRolledOut(t, ns, "stale")
	restoreSet(t, ns, "stale", backupStatus, backupSource)
	if err := k8s.Delete(ctxT(t), getSet(t, ns, "stale")); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "DualPasswordExists event", waitEventNoting(t, ns, "stale", reason.DualPasswordExists, "the set is deleted"), "kubectl rekey recover")
	stale := getSet(t, ns, "stale")
	annotate(t, ns, "stale", engine.RecoverAnnotation, "c1")
	mp.waitKilled(t, "reset/backend-reset")
	if st := getSet(t, ns, "stale").Status; !st.ResetPending {
		t.Fatalf("the manager was killed after the reset, yet the set no longer owes it: %+v", st)
	}
	observed(t, "the recovery's reset done, not recorded (the manager killed); the copy read before the recovery is resourceVersion %s", stale.ResourceVersion)

	r := &controller.Reconciler{Client: k8s, APIReader: olderSet{k8s, stale}, Recorder: discardEvents{}, Namespace: OperatorNamespace}
	_, err := r.Reconcile(ctxT(t), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(stale)})
	t.Logf("the reconcile from the older copy: %v", err)
	if src := sourceData(t, getSet(t, ns, "stale")); len(src) == 0 {
		t.Fatal("a reconcile from a copy older than the recovery emptied the source Secret")
	}
	loginMatrix(t, "after the reconcile from the older copy", c.Instances(), cur, nil)

	startManager(t, cp.Config)
	waitSetGone(t, ns, "stale")
	loginMatrix(t, "after the recovery and the wind-down", c.Instances(), cur, nil)
	assertNoRefusals(t, pc)
}

// olderSet reads set in place of the CredentialSet the API server holds:
// what a manager's cache that lags hands a reconcile.
type olderSet struct {
	client.Reader
	set *v1.CredentialSet
}

func (o olderSet) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if cs, ok := obj.(*v1.CredentialSet); ok && key == client.ObjectKeyFromObject(o.set) {
		o.set.DeepCopyInto(cs)
		return nil
	}
	return o.Reader.Get(ctx, key, obj, opts...)
}

// discardEvents drops the Events of a reconcile a test runs by hand.
type discardEvents struct{}

func (discardEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}
