package e2e

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestScaleInThenOut: the StatefulSet holding the instances is scaled 3 →
// 1 and back, its pods db-1 and db-2 returning with the volumes they left
// with (their mysqld stopped while away, as a deleted pod's is, and
// started again from the same data directory). rekey's statements never
// replicate, so a returning instance holds what rekey made there before
// it left:
//
//   - scaled in while Idle, the set rotated and discarded without them:
//     they return with the previous generation, refusing the consumers'
//     passwords; after the set's next reconcile (the scale wakes it) every
//     instance accepts the current passwords and refuses the old ones;
//   - scaled in while Distributed, the discard ran without them: they
//     return with both passwords, the old one (perhaps leaked) still
//     valid; after the next reconcile it is refused there.
//
// The set's admin is not rotated (ops-admin), as a plain StatefulSet's
// often is: rekey logs in to a returning instance with it. Consumers are
// pods that read the Secret at start and log in round-robin over the
// instances that serve: a returning instance serves once it accepts what
// they hold (at once in the second case); not one of their logins may be
// refused.
func TestScaleInThenOut(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{Replicas: 2})
	ns := newNamespace(t)
	away := c.Replicas // db-1 and db-2
	stsManager(t, ns, c)
	keys := map[string]string{"SCL_PASSWORD": "scl"}
	targets := &probeTargets{insts: c.Instances()}
	set := appUserSet(t, ns, "scl", c)
	set.Spec.MySQL.Instances = v1.MySQLInstances{StatefulSet: &v1.StatefulSetInstances{Name: "db"}}
	set.Spec.MySQL.TLSServerName = testenv.MySQLTLSName
	pc := deployConsumers(t, set, keys, targets.list)
	if err := k8s.Create(ctxT(t), set); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "scl", v1.PhaseIdle, 1)
	cur := userPasswords(sourceData(t, cs), keys, "")
	p := probeLoop(t, ns, "scl-db", keys, targets.list, nil, func() { targets.rounds.Add(1) })

	scaleIn := func(t *testing.T) {
		t.Helper()
		for _, i := range away {
			targets.remove(i)
		}
		scale(t, ns, "db", 1)
		for _, i := range away {
			i.Stop()
		}
		observed(t, "StatefulSet db scaled to 1: db-1 and db-2 stopped, their data directories kept")
	}
	scaleOut := func(t *testing.T) time.Time {
		t.Helper()
		scale(t, ns, "db", 3)
		for _, i := range away {
			if err := i.Start(); err != nil {
				t.Fatal(err)
			}
		}
		observed(t, "StatefulSet db scaled back to 3: db-1 and db-2 started from their old data directories")
		return time.Now()
	}
	// repaired waits until every instance accepts now and refuses old.
	repaired := func(t *testing.T, since time.Time, now, old map[string]string) time.Duration {
		t.Helper()
		var took time.Duration
		eventually(t, time.Minute, "every instance accepts the current passwords and refuses the old ones", func() (bool, string) {
			for _, i := range c.Instances() {
				for u, pw := range now {
					if err := i.CanLogin(u, pw); err != nil {
						return false, fmt.Sprintf("%s refuses the current password of %s: %v", i.Name, u, err)
					}
					if err := i.CanLogin(u, old[u]); err == nil {
						return false, fmt.Sprintf("%s still accepts the old password of %s", i.Name, u)
					}
				}
			}
			took = time.Since(since)
			return true, ""
		})
		loginMatrix(t, "after the return", c.Instances(), now, old)
		return took
	}
	// served waits until the probe and the consumer pods have gone round
	// the returned instances a few times.
	served := func(t *testing.T) {
		t.Helper()
		start, logins := targets.rounds.Load(), pc.totals().attempts
		eventually(t, time.Minute, "logins on the returned instances", func() (bool, string) {
			return targets.rounds.Load() >= start+3 && pc.totals().attempts > logins+10, ""
		})
	}

	t.Run("scaled in while Idle, rotated and discarded, scaled back from the old volumes", func(t *testing.T) {
		mk := matrixMark(t, p, "StatefulSet scaled 3 → 1 while Idle, rotated and discarded, scaled back to 3 from the old volumes")
		scaleIn(t)
		rotate(t, ns, "scl", "scl-1")
		waitPhase(t, ns, "scl", v1.PhaseDistributed, 1)
		discard(t, ns, "scl", "scl-1")
		cs := waitPhase(t, ns, "scl", v1.PhaseIdle, 2)
		now := userPasswords(sourceData(t, cs), keys, "")
		mk.resume()
		took := repaired(t, scaleOut(t), now, cur)
		mk.reached()
		mk.saw("every instance accepted the current password and refused the old %.1f s after the scale-out", took.Seconds())
		for _, i := range away {
			targets.add(i)
		}
		served(t)
		cur = now
		mk.done(t, "the returned instances were set back to the current passwords by the reconcile the scale-out woke; consumers used them then, none refused")
	})

	t.Run("scaled in while Distributed, discarded, scaled back", func(t *testing.T) {
		mk := matrixMark(t, p, "StatefulSet scaled 3 → 1 while Distributed, discarded, scaled back to 3 from the old volumes")
		rotate(t, ns, "scl", "scl-2")
		cs := waitPhase(t, ns, "scl", v1.PhaseDistributed, 2)
		pend := userPasswords(sourceData(t, cs), keys, engine.PendingSuffix)
		scaleIn(t)
		discard(t, ns, "scl", "scl-2")
		waitPhase(t, ns, "scl", v1.PhaseIdle, 3)
		mk.resume()
		back := scaleOut(t)
		// They accept what consumers hold (and the old password): they
		// serve at once.
		for _, i := range away {
			targets.add(i)
		}
		took := repaired(t, back, pend, cur)
		mk.reached()
		mk.saw("the old password refused on db-1 and db-2 %.1f s after the scale-out", took.Seconds())
		served(t)
		cur = pend
		mk.done(t, "the returned instances' old passwords were discarded by the reconcile the scale-out woke; consumers used them throughout, none refused")
	})

	// rebuild stands for a pod of db that returns from a new, empty
	// volume: mysqld re-initialised, its bootstrap creating the set's
	// admin (as a cluster's does), rekey's users missing (their DDL never
	// replicates).
	rebuilt := c.Replicas[1] // db-2
	rebuild := func(t *testing.T) {
		t.Helper()
		if err := rebuilt.Reinit(c.Primary, testenv.ReinitOptions{Bootstrap: []string{
			"CREATE USER 'ops-admin'@'%' IDENTIFIED BY 'ops-admin-password-for-tests'",
			"GRANT ALL PRIVILEGES ON *.* TO 'ops-admin'@'%' WITH GRANT OPTION"}}); err != nil {
			t.Fatal(err)
		}
		if rebuilt.CanLogin("scl", cur["scl"]) == nil {
			t.Fatal("the rebuilt instance already has the set's user")
		}
	}

	t.Run("a recovery under way, db-2 rebuilt from an empty data directory", func(t *testing.T) {
		mk := matrixMark(t, p, "kubectl rekey recover on the Idle set with its consumers' rollout paused, db-2 scaled in and back rebuilt from an empty data directory")
		pauseRollout(t, ns, "scl-app", true) // holds the recovery's reset
		annotate(t, ns, "scl", engine.RecoverAnnotation, "scl-rec-1")
		eventually(t, time.Minute, "the recovery's reset owed", func() (bool, string) {
			cs := getSet(t, ns, "scl")
			return cs.Status.ResetPending && cs.Status.LastRecoverID == "scl-rec-1", stateOf(cs)
		})
		targets.remove(rebuilt)
		scale(t, ns, "db", 2)
		rebuild(t)
		mk.resume()
		back := time.Now()
		scale(t, ns, "db", 3)
		observed(t, "StatefulSet db scaled back to 3: db-2 rebuilt empty, its admin bootstrapped")
		eventually(t, time.Minute, "db-2 accepts the consumers' current password", func() (bool, string) {
			if err := rebuilt.CanLogin("scl", cur["scl"]); err != nil {
				return false, err.Error()
			}
			return true, ""
		})
		mk.reached()
		took := time.Since(back)
		if cs := getSet(t, ns, "scl"); !cs.Status.ResetPending {
			t.Fatalf("the reset ran although the consumers' rollout is paused: %s", stateOf(cs))
		}
		mk.saw("db-2 accepted the current password %.1f s after its return, the recovery's reset still owed", took.Seconds())
		targets.add(rebuilt)
		served(t)
		pauseRollout(t, ns, "scl-app", false)
		eventually(t, 3*time.Minute, "the recovery's reset done", func() (bool, string) {
			cs := getSet(t, ns, "scl")
			return !cs.Status.ResetPending, stateOf(cs)
		})
		loginMatrix(t, "after the recovery", c.Instances(), cur, nil)
		assertNoDualPassword(t, c)
		mk.done(t, "the rebuilt instance's user was created with the current password by the reconcile its return woke, while the reset waited for the consumers; the reset then ran; none refused")
	})

	t.Run("deleted (deletionPolicy Discard) while db-2 is down, db-2 rebuilt before the wind-down", func(t *testing.T) {
		mk := matrixMark(t, p, "set deleted (deletionPolicy Discard) while db-2 does not answer, db-2 then rebuilt from an empty data directory")
		targets.remove(rebuilt)
		rebuilt.Stop()
		if err := k8s.Delete(ctxT(t), getSet(t, ns, "scl")); err != nil {
			t.Fatal(err)
		}
		// The wind-down reaches every instance: it waits while db-2 does
		// not answer.
		mustContain(t, "the wind-down's Warning", waitEventNoting(t, ns, "scl", reason.BackendError, "could not be wound down"), "db-2")
		rebuild(t)
		mk.resume()
		annotate(t, ns, "scl", "test.rekey.io/touch", "db-2-rebuilt") // rather than wait for the back-off
		waitSetGoneWithin(t, ns, "scl", 3*time.Minute)
		mk.reached()
		// Discard: the current password stays valid for the consumers
		// that hold it, on every instance.
		loginMatrix(t, "after the wind-down", c.Instances(), cur, nil)
		targets.add(rebuilt)
		served(t)
		mk.done(t, "the wind-down created the rebuilt instance's user with the current password before it released the users; the set went; consumers logged in there, none refused")
	})

	p.assertNoGap(t)
	tot := pc.totals()
	t.Logf("consumer pods: %d logins, %d refused, %d pod starts", tot.attempts, tot.refused, tot.starts)
	if tot.refused > 0 {
		t.Errorf("consumer pods: %d of %d logins refused: %v", tot.refused, tot.attempts, pc.refusalsSince(time.Time{}))
	}
	for _, i := range c.Instances() {
		if ddl, err := i.CredentialDDLInBinlog(); err != nil || len(ddl) > 0 {
			t.Fatalf("%s: credential DDL in the binary log: %v (%v)", i.Name, ddl, err)
		}
	}
}

// pauseRollout pauses Deployment name (or resumes it): its pods keep what
// they read until it resumes.
func pauseRollout(t *testing.T, ns, name string, paused bool) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Paused = paused
	if err := k8s.Patch(ctxT(t), d, patch); err != nil {
		t.Fatal(err)
	}
	observed(t, "Deployment %s paused=%v", name, paused)
}
