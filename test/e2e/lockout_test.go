package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestPartialDiscardCanOnlyComplete: the manager is killed after the first
// instance dropped the old passwords and before the others did. An abort
// then would hand consumers the old passwords, which that instance now
// refuses; so abort and recover are refused, and the next manager finishes
// the discard by itself — no request needed.
func TestPartialDiscardCanOnlyComplete(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	if err := k8s.Create(ctxT(t), mocoSet(t, ns, "half", c)); err != nil {
		t.Fatal(err)
	}
	m := startManagerProcessWith(t, "discard/instance-retired:1", "--instance-concurrency", "1")
	cs := waitPhase(t, ns, "half", v1.PhaseIdle, 1)
	old := userPasswords(sourceData(t, cs), mocoKeys, "")
	rotate(t, ns, "half", "r-half")
	cs = waitPhase(t, ns, "half", v1.PhaseDistributed, 1)
	pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
	discard(t, ns, "half", "r-half")
	m.waitKilled(t, "discard/instance-retired")

	// One instance (one at a time) refuses the old passwords already; the
	// others still take both.
	insts := c.Instances()
	var done, todo []*testenv.MySQLInstance
	for _, i := range insts {
		if refusesAll(t, i, old) {
			done = append(done, i)
		} else {
			todo = append(todo, i)
		}
	}
	if len(done) != 1 {
		t.Fatalf("%d of %d instances refuse the old passwords after the kill, want exactly 1", len(done), len(insts))
	}
	loginMatrix(t, "after the kill", done, pend, old)
	loginMatrix(t, "after the kill", todo, pend, nil)
	loginMatrix(t, "after the kill", todo, old, nil)
	cs = getSet(t, ns, "half")
	if !cs.Status.DiscardStarted || cs.Status.DiscardApplied {
		t.Fatalf("status after the kill: discardStarted %v, discardApplied %v; want true, false", cs.Status.DiscardStarted, cs.Status.DiscardApplied)
	}

	// Asked through the API as a user would: the abort is refused (the
	// engine's table test covers recover), and with the discard request
	// withdrawn too, the discard still finishes.
	annotate(t, ns, "half", engine.AbortAnnotation, "r-half")
	annotate(t, ns, "half", engine.DiscardAnnotation, "")
	startManager(t, cp.Config)
	cs = waitPhase(t, ns, "half", v1.PhaseIdle, 2)
	mustContain(t, "AbortSkipped event", waitEvent(t, ns, "half", string(reason.AbortSkipped)), "began discarding the old secrets", "can only complete")
	if cs.Status.LastRolledBackID != "" || cs.Status.ResetPending {
		t.Fatalf("the rotation was rolled back after a partial discard: %s", stateOf(cs))
	}
	loginMatrix(t, "after the discard finished", insts, pend, old)
	dist := secretData(t, ns, "half-creds")
	for key, user := range mocoKeys {
		if string(dist[key]) != pend[user] {
			t.Fatalf("distribution Secret holds %s's old password after completion", user)
		}
	}
}

// TestRotationSignals: a set with discardPolicy AfterRollout and no
// declared consumer does not retire the old passwords by itself (nobody
// proved the new ones are in use); a rotation left active past
// rotation.stuckAfter raises RotationStuck with what it waits for, and a
// Secret rekey wrote that is edited by hand comes back at once, without a
// resync.
func TestRotationSignals(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	startManager(t, cp.Config) // no resync period: only watches wake it
	cs := mocoSet(t, ns, "sig", c)
	cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout, GracePeriod: &metav1.Duration{Duration: time.Second},
		StuckAfter: &metav1.Duration{Duration: 3 * time.Second}}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "sig", v1.PhaseIdle, 1)
	old := userPasswords(sourceData(t, cs), mocoKeys, "")

	t.Run("a hand-edited distribution Secret is restored by the watch", func(t *testing.T) {
		want := secretData(t, ns, "sig-creds")
		s := &corev1.Secret{}
		if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "sig-creds"}, s); err != nil {
			t.Fatal(err)
		}
		for k := range s.Data {
			s.Data[k] = []byte("edited-by-hand")
		}
		if err := k8s.Update(ctxT(t), s); err != nil {
			t.Fatal(err)
		}
		eventually(t, 15*time.Second, "distribution Secret restored", func() (bool, string) {
			got := secretData(t, ns, "sig-creds")
			for k, v := range want {
				if string(got[k]) != string(v) {
					return false, "key " + k + " still edited"
				}
			}
			return true, ""
		})
		if err := k8s.Delete(ctxT(t), s); err != nil {
			t.Fatal(err)
		}
		eventually(t, 15*time.Second, "deleted distribution Secret recreated", func() (bool, string) {
			got := &corev1.Secret{}
			err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "sig-creds"}, got)
			return err == nil, fmt.Sprint(err)
		})
	})

	t.Run("AfterRollout without a consumer holds, and a long rotation is stuck", func(t *testing.T) {
		rotate(t, ns, "sig", "r-sig")
		cs := waitPhase(t, ns, "sig", v1.PhaseDistributed, 1)
		pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
		mustContain(t, "AutoDiscardHeld event", waitEvent(t, ns, "sig", string(reason.AutoDiscardHeld)), "declares no consumers", "kubectl rekey discard")
		mustContain(t, "RotationStuck event", waitEvent(t, ns, "sig", string(reason.RotationStuck)), "rotation r-sig has been active", "step AwaitingDiscard of phase Distributed", "AutoDiscardHeld")
		cs = getSet(t, ns, "sig")
		if cs.Status.Step != engine.StepAwaitingDiscard {
			t.Fatalf("held for a discard with no consumer declared, the set's step is %q, want AwaitingDiscard", cs.Status.Step)
		}
		if cs.Status.Phase != v1.PhaseDistributed || cs.Status.DiscardStarted {
			t.Fatalf("old passwords retired with no consumer declared: %s", stateOf(cs))
		}
		if c := condition(cs, reason.CondRotationStuck); c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("RotationStuck condition: %+v", c)
		}
		if v, ok := metricValue(t, "rekey_rotation_stuck", map[string]string{"namespace": ns, "name": "sig"}); !ok || v != 1 {
			t.Fatalf("rekey_rotation_stuck = %v (present %v), want 1", v, ok)
		}
		loginMatrix(t, "while held", c.Instances(), old, nil)
		loginMatrix(t, "while held", c.Instances(), pend, nil)

		discard(t, ns, "sig", "r-sig")
		cs = waitPhase(t, ns, "sig", v1.PhaseIdle, 2)
		loginMatrix(t, "after the discard by hand", c.Instances(), pend, old)
		eventually(t, 30*time.Second, "RotationStuck cleared", func() (bool, string) {
			cs := getSet(t, ns, "sig")
			c := condition(cs, reason.CondRotationStuck)
			v, _ := metricValue(t, "rekey_rotation_stuck", map[string]string{"namespace": ns, "name": "sig"})
			return c != nil && c.Status == metav1.ConditionFalse && v == 0, condSummary(cs)
		})
	})
}

// refusesAll: every user's password in pw is refused by instance i.
func refusesAll(t testing.TB, i *testenv.MySQLInstance, pw map[string]string) bool {
	t.Helper()
	for user, p := range pw {
		if err := i.CanLogin(user, p); err == nil {
			return false
		}
	}
	return true
}
