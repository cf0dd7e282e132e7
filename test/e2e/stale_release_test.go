package e2e

import (
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// TestStaleRecoverAfterRelease: on a real API server, primary and replica,
// a reconcile from a copy of the set read before its deletion must not
// write what it decided for a set that lives, even when the status it
// read is again the one the server holds (a restore from backup put it
// back). The set (deletionPolicy Discard) is recovered once; its status
// and source Secret restored from the backup taken before; deleted; and
// the manager killed right after its wind-down released the login (its
// mark taken off), before the source Secret was emptied. Then a reconcile
// reads the copy a cache that lags may hold: the set before its deletion,
// the recover request just written, the status the restore put back.
// Before, its status write passed (the status alone was compared) and the
// deleted set owed the reset of a recovery, which every reconcile after
// then refused on the released login (NotOwned): the finalizer never went
// (found by the explorer's PostgreSQL random walks, seed 3, 32 steps). Now
// the write also holds the set to not being deleted since the copy, the
// wind-down completes, and the current login still logs in, on both
// servers.
func TestStaleRecoverAfterRelease(t *testing.T) {
	p := testenv.PostgresForTest(t)
	if err := p.Exec(p.Primary, "CREATE ROLE stale_owner NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	mp := startManagerProcess(t, "delete/backend-wound-down")
	ns := newNamespace(t)
	createSecret(t, ns, "pg-admin", map[string]string{"username": p.AdminUser, "password": p.AdminPassword})
	createSecret(t, ns, "pg-ca", map[string]string{"ca.crt": string(p.CAPEM)})
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sr"},
		Spec: v1.CredentialSetSpec{
			Postgres: &v1.PostgresSpec{
				Hosts:          []string{p.Primary.Addr(), p.Replica.Addr()},
				Admin:          v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "pg-admin"}},
				TLSCASecretRef: &v1.SecretKeyRef{Name: "pg-ca", Key: "ca.crt"},
				Login:          v1.PostgresLogin{Base: "sr", Group: "stale_owner"},
			},
			Distribution:   []v1.SecretTarget{{Namespace: ns, Name: "sr-db"}},
			DeletionPolicy: v1.DeletionDiscard,
		},
	}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "sr", v1.PhaseIdle, 1)
	backupStatus, backupSource := *cs.Status.DeepCopy(), maps.Clone(sourceData(t, cs))
	user, password := string(backupSource["username"]), string(backupSource["password"])
	// The set as the API server held it the instant the recover request
	// was written, before the manager moved the status on.
	stale := cs.DeepCopy()
	stale.Annotations = map[string]string{engine.RecoverAnnotation: "c1"}
	annotate(t, ns, "sr", engine.RecoverAnnotation, "c1")
	waitFor(t, 2*time.Minute, "recovery c1 done", func() (bool, string) {
		cs := getSet(t, ns, "sr")
		return cs.Status.LastRecoverID == "c1" && !cs.Status.ResetPending, stateOf(cs)
	})
	// The user drops the request, done.
	done := getSet(t, ns, "sr")
	patch := client.MergeFrom(done.DeepCopy())
	delete(done.Annotations, engine.RecoverAnnotation)
	if err := k8s.Patch(ctxT(t), done, patch); err != nil {
		t.Fatal(err)
	}
	restoreSet(t, ns, "sr", backupStatus, backupSource)
	if err := k8s.Delete(ctxT(t), getSet(t, ns, "sr")); err != nil {
		t.Fatal(err)
	}
	mp.waitKilled(t, "delete/backend-wound-down")
	observed(t, "recovered, restored from before the recovery, deleted; the manager killed once the wind-down released %s", user)

	// Its status is the one the server holds now, which the restore put
	// back (what the manager wrote since, a condition's time, must not
	// make the copy fail for another reason than its deletion).
	stale.Status = *getSet(t, ns, "sr").Status.DeepCopy()
	r := &controller.Reconciler{Client: k8s, APIReader: olderSet{k8s, stale}, Recorder: discardEvents{}, Namespace: OperatorNamespace}
	_, err := r.Reconcile(ctxT(t), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(stale)})
	t.Logf("the reconcile from the copy read before the deletion: %v", err)
	if st := getSet(t, ns, "sr").Status; st.ResetPending || st.LastRecoverID != "" {
		t.Fatalf("a reconcile from a copy read before the deletion wrote a recovery on the deleted set: resetPending %v, lastRecoverID %q", st.ResetPending, st.LastRecoverID)
	}

	startManager(t, cp.Config)
	waitSetGone(t, ns, "sr")
	for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
		if err := p.CanLogin(i, user, password); err != nil {
			t.Fatalf("after the wind-down (Discard) %s no longer logs in on %s: %v", user, i.Addr(), err)
		}
	}
}
