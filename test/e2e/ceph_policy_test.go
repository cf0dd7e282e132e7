package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/cephkube"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// quiet is how long a set must stay as it is to show that a policy did not
// fire: several resyncs, each of which asks the policy again.
const quiet = 4 * time.Second

// TestCephRotationPolicies shows, on the real mon, that each rotation
// policy (KeyGeneration, WithVersionUpgrade, Schedule) starts a rotation
// exactly when it should and at no other time: the mon's key changes (the
// old one refused) when it fires and stays when it does not, and status
// reports the generation and the version that minted the keys whatever the
// policy.
func TestCephRotationPolicies(t *testing.T) {
	c := testenv.CephForTest(t)
	// The manager re-checks idle sets every second (5 minutes in
	// production): nothing else wakes a set when only the backend's version
	// changes, and every resync asks the policy once more, so "nothing
	// happened" covers many decisions, not one.
	//
	// The mon cannot change version on demand, so the manager runs a CLI
	// (--ceph-cli, as an administrator would set it) that answers `ceph
	// version` with what the test says, the point where rekey reads it,
	// and runs every other command on the real mon. It reports the mon's
	// real version until WithVersionUpgrade changes it.
	cli, setVersion := versionWrapper(t, c, c.Version)
	startManager(t, cp.Config, withCephWorkDir(c), func(r *controller.Reconciler) {
		r.ResyncPeriod = time.Second
		r.Settings.Set(cephkube.FlagCLI, cli)
	})
	ns := newNamespace(t)
	autoDiscard := v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout, GracePeriod: &metav1.Duration{Duration: time.Second}}

	t.Run("Disabled", func(t *testing.T) {
		const name, entity = "disabled", "client.policy-disabled"
		cs := policySet(t, c, ns, name, entity, v1.RotationSpec{})
		if cs.Spec.Rotation.Policy != v1.PolicyDisabled {
			t.Fatalf("an unset policy defaulted to %q, want Disabled", cs.Spec.Rotation.Policy)
		}
		// keyGeneration and keyVersion are filled when keys are first created,
		// even with rotation disabled.
		if cs.Status.KeyGeneration != 1 || cs.Status.KeyVersion != c.Version {
			t.Fatalf("after provisioning keyGeneration %d keyVersion %q, want 1 and the mon's %q", cs.Status.KeyGeneration, cs.Status.KeyVersion, c.Version)
		}
		key := assertCephSecrets(t, c, cs, entity)[entity]
		holdsFor(t, quiet, "a Disabled set stays at generation 1", idleAt(t, ns, name, 1, ""))
		if notes := eventNotes(t, ns, name, reason.RotationStarted); len(notes) > 0 {
			t.Fatalf("a Disabled set started rotations: %v", notes)
		}
		if cs := getSet(t, ns, name); cs.Status.NextRotationAt != nil {
			t.Fatalf("nextRotationAt %v without policy Schedule", cs.Status.NextRotationAt)
		}
		assertKeyKept(t, c, ns, name, entity, key)
	})

	t.Run("KeyGeneration", func(t *testing.T) {
		const name, entity = "keygen", "client.policy-keygen"
		cs := policySet(t, c, ns, name, entity, autoDiscard)
		key := assertCephSecrets(t, c, cs, entity)[entity]
		keyGeneration := func(g int64) {
			setRotation(t, ns, name, func(r *v1.RotationSpec) {
				r.Policy, r.KeyGeneration = v1.PolicyKeyGeneration, ptr.To(g)
			})
		}

		// 3 above 1: one rotation, and the generation jumps to 3.
		keyGeneration(3)
		mustContain(t, "PolicyTriggered", waitEvent(t, ns, name, string(reason.PolicyTriggered)), "keygeneration-3")
		cs = waitPhase(t, ns, name, v1.PhaseIdle, 3)
		if cs.Status.LastRotationID != "keygeneration-3" {
			t.Fatalf("lastRotationID %q, want keygeneration-3", cs.Status.LastRotationID)
		}
		key = assertKeysReplaced(t, c, cs, map[string]string{entity: key})[entity]

		// Equal to or below status: done already, nothing to do. (Writing 3
		// again changes nothing, so one hold covers both.)
		keyGeneration(3)
		keyGeneration(2)
		holdsFor(t, quiet, "keyGeneration 3, then 2, does not rotate a set at 3", idleAt(t, ns, name, 3, "keygeneration-3"))
		assertKeyKept(t, c, ns, name, entity, key)

		// 4 above 3: exactly one more rotation.
		keyGeneration(4)
		cs = waitPhase(t, ns, name, v1.PhaseIdle, 4)
		if cs.Status.LastRotationID != "keygeneration-4" {
			t.Fatalf("lastRotationID %q, want keygeneration-4", cs.Status.LastRotationID)
		}
		key = assertKeysReplaced(t, c, cs, map[string]string{entity: key})[entity]
		holdsFor(t, quiet, "keyGeneration 4 rotates once", idleAt(t, ns, name, 4, "keygeneration-4"))
		assertKeyKept(t, c, ns, name, entity, key)

		// A rotate request still works with a policy set; the generation
		// it reaches (5) is above the spec's, which therefore stays quiet.
		rotate(t, ns, name, "by-hand")
		cs = waitPhase(t, ns, name, v1.PhaseIdle, 5)
		if cs.Status.LastRotationID != "by-hand" {
			t.Fatalf("lastRotationID %q, want by-hand", cs.Status.LastRotationID)
		}
		key = assertKeysReplaced(t, c, cs, map[string]string{entity: key})[entity]
		holdsFor(t, quiet, "keyGeneration 4 does not rotate a set at 5", idleAt(t, ns, name, 5, "by-hand"))
		assertKeyKept(t, c, ns, name, entity, key)
	})

	t.Run("WithVersionUpgrade", func(t *testing.T) {
		const name, entity = "version", "client.policy-version"
		// Whatever happens here, later subtests see the mon's version.
		t.Cleanup(func() { setVersion(c.Version) })
		const upgrade = "20.2.99"
		if engine.CompareVersions(upgrade, c.Version) <= 0 {
			t.Fatalf("the test's upgrade %s is not above the mon's %s", upgrade, c.Version)
		}
		rot := autoDiscard
		rot.Policy = v1.PolicyWithVersionUpgrade
		cs := policySet(t, c, ns, name, entity, rot)
		if cs.Status.KeyVersion != c.Version {
			t.Fatalf("keyVersion %q after provisioning, want %q", cs.Status.KeyVersion, c.Version)
		}
		key := assertCephSecrets(t, c, cs, entity)[entity]
		holdsFor(t, quiet, "the version that minted the keys does not rotate them", idleAt(t, ns, name, 1, ""))
		assertKeyKept(t, c, ns, name, entity, key)

		setVersion(upgrade)
		mustContain(t, "PolicyTriggered", waitEvent(t, ns, name, string(reason.PolicyTriggered)), upgrade, c.Version)
		cs = waitPhase(t, ns, name, v1.PhaseIdle, 2)
		if cs.Status.KeyVersion != upgrade {
			t.Fatalf("keyVersion %q after the upgrade's rotation, want %s", cs.Status.KeyVersion, upgrade)
		}
		last := cs.Status.LastRotationID
		mustContain(t, "lastRotationID", last, upgrade)
		key = assertKeysReplaced(t, c, cs, map[string]string{entity: key})[entity]
		holdsFor(t, quiet, "one upgrade rotates once", idleAt(t, ns, name, 2, last))

		// A downgrade (back to the real, older version) mints nothing.
		setVersion(c.Version)
		holdsFor(t, quiet, "a downgrade does not rotate", idleAt(t, ns, name, 2, last))
		if cs := getSet(t, ns, name); cs.Status.KeyVersion != upgrade {
			t.Fatalf("keyVersion %q after a downgrade, want %s: it names the version that minted the keys", cs.Status.KeyVersion, upgrade)
		}
		assertKeyKept(t, c, ns, name, entity, key)
	})

	t.Run("Schedule", func(t *testing.T) {
		const name, entity = "schedule", "client.policy-schedule"
		rot := autoDiscard
		rot.Policy, rot.Interval = v1.PolicySchedule, &metav1.Duration{Duration: 10 * time.Minute}
		cs := policySet(t, c, ns, name, entity, rot)
		key := assertCephSecrets(t, c, cs, entity)[entity]
		cs = waitNextRotation(t, ns, name)
		due := cs.Status.CurrentSince.Add(10 * time.Minute)
		if !cs.Status.NextRotationAt.Time.Equal(due) {
			t.Fatalf("nextRotationAt %s, want currentSince + 10m = %s", cs.Status.NextRotationAt, due)
		}
		holdsFor(t, quiet, "credentials younger than the interval stay", idleAt(t, ns, name, 1, ""))
		assertKeyKept(t, c, ns, name, entity, key)

		// Age the credentials past the interval, as 11 minutes would.
		since := cs.Status.CurrentSince.Add(-11 * time.Minute)
		id := fmt.Sprintf("schedule-%d", since.Add(10*time.Minute).Unix())
		setCurrentSince(t, ns, name, since)
		eventually(t, 2*time.Minute, "rotation "+id, func() (bool, string) {
			cs := getSet(t, ns, name)
			if cs.Status.RotationID == id || cs.Status.LastRotationID == id {
				return true, ""
			}
			// Status writes test only (phase, rotationID): one based on a
			// read from before the patch can put currentSince back.
			if cs.Status.Phase == v1.PhaseIdle && !cs.Status.CurrentSince.Time.Equal(since) {
				setCurrentSince(t, ns, name, since)
			}
			return false, stateOf(cs)
		})
		mustContain(t, "RotationStarted", waitEvent(t, ns, name, string(reason.RotationStarted)), id)
		cs = waitPhase(t, ns, name, v1.PhaseIdle, 2)
		if cs.Status.LastRotationID != id {
			t.Fatalf("lastRotationID %q, want %s", cs.Status.LastRotationID, id)
		}
		key = assertKeysReplaced(t, c, cs, map[string]string{entity: key})[entity]
		cs = waitNextRotation(t, ns, name)
		if next := cs.Status.CurrentSince.Add(10 * time.Minute); !cs.Status.NextRotationAt.Time.Equal(next) || !next.After(due) {
			t.Fatalf("nextRotationAt %s after the rotation, want currentSince + 10m = %s, after %s", cs.Status.NextRotationAt, next, due)
		}
		holdsFor(t, quiet, "the scheduled rotation happens once", idleAt(t, ns, name, 2, id))
		assertKeyKept(t, c, ns, name, entity, key)
	})
}

// policySet creates an InPlace set of one entity (mon caps, so that its key
// can be tried) with rotation rot; it waits for generation 1 and deletes
// the set when the subtest ends, so that the one manager works on one set
// at a time.
func policySet(t testing.TB, c *testenv.Ceph, ns, name, entity string, rot v1.RotationSpec) *v1.CredentialSet {
	t.Helper()
	cs := cephSet(t, c, ns, name, v1.CephInPlace, v1.CephEntity{Name: entity, Caps: v1.CephCaps{Mon: "allow r"}})
	cs.Spec.Rotation = rot
	if rot.DiscardPolicy == v1.DiscardAfterRollout {
		// AfterRollout retires only once a declared consumer moved: the
		// daemon using the key is redeployed and reported by automation.
		cs.Spec.ConsumerGroups = []v1.ConsumerGroup{ackerGroup("node-1")}
	}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	deleteAtEnd(t, cs)
	if rot.DiscardPolicy == v1.DiscardAfterRollout {
		ackEveryDistribution(t, ns, name, "node-1")
	}
	return waitPhase(t, ns, name, v1.PhaseIdle, 1)
}

// idleAt holds while no rotation runs or has completed since the set was
// Idle at generation gen after rotation last.
func idleAt(t testing.TB, ns, name string, gen int64, last string) func() (bool, string) {
	return func() (bool, string) {
		cs := getSet(t, ns, name)
		st := cs.Status
		return st.Phase == v1.PhaseIdle && st.RotationID == "" && st.KeyGeneration == gen && st.LastRotationID == last, stateOf(cs)
	}
}

// assertKeyKept: the mon still holds key for entity, and so does the
// source Secret (key authenticated when it was checked last).
func assertKeyKept(t testing.TB, c *testenv.Ceph, ns, name, entity, key string) {
	t.Helper()
	onMon, err := c.Key(ctxT(t), entity)
	if err != nil {
		t.Fatal(err)
	}
	if _, stored := keyOf(t, sourceData(t, getSet(t, ns, name))[entity]); onMon != key || stored != key {
		t.Fatalf("%s's key changed although no rotation ran", entity)
	}
}

// setRotation changes spec.rotation, retrying on conflicts with the
// manager's writes.
func setRotation(t testing.TB, ns, name string, mutate func(*v1.RotationSpec)) {
	t.Helper()
	eventually(t, 30*time.Second, "spec.rotation updated", func() (bool, string) {
		cs := getSet(t, ns, name)
		mutate(&cs.Spec.Rotation)
		err := k8s.Update(context.Background(), cs)
		if apierrors.IsConflict(err) {
			return false, err.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		return true, ""
	})
}

// setCurrentSince rewrites status.currentSince, as the passing of time would.
func setCurrentSince(t testing.TB, ns, name string, at time.Time) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"status": map[string]any{"currentSince": metav1.NewTime(at)}})
	if err != nil {
		t.Fatal(err)
	}
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.Status().Patch(context.Background(), cs, client.RawPatch(types.MergePatchType, body)); err != nil {
		t.Fatal(err)
	}
}

// waitNextRotation waits until status.nextRotationAt is computed from the
// current credentials' status.currentSince.
func waitNextRotation(t testing.TB, ns, name string) *v1.CredentialSet {
	t.Helper()
	var cs *v1.CredentialSet
	eventually(t, time.Minute, "nextRotationAt", func() (bool, string) {
		cs = getSet(t, ns, name)
		st := cs.Status
		return st.Phase == v1.PhaseIdle && st.NextRotationAt != nil && st.CurrentSince != nil &&
			!st.NextRotationAt.Time.Before(st.CurrentSince.Time), stateOf(cs)
	})
	return cs
}

// eventNotes lists the notes of the set's Events with reason why.
func eventNotes(t testing.TB, ns, name string, why reason.Reason) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == string(why) {
			notes = append(notes, e.Note)
		}
	}
	return notes
}
