package e2e

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestCephResetAfterHandRotation, on a real mon with a real manager
// process: a set of two entities (Overlapping) aborts r1 and the manager is
// killed once the rollback is recorded, its reset owed; a person then
// rotates client.rha's current generation by hand. The rollback's
// verification of the current keys is refused (PendingRejected) naming what
// to delete from the source Secret outside a rotation; the test deletes
// exactly what the message names, and the set must come back to Idle with
// no reset owed, a key the mon accepts served for client.rha, and r1's
// generation of client.rhb gone. The message used to say "at rest delete
// client.rha": the pending keys stayed, the read back (which waits for no
// pending key to be left) never ran, and the set stayed as it was.
func TestCephResetAfterHandRotation(t *testing.T) {
	c := testenv.CephForTest(t)
	ns := newNamespace(t)
	flags := []string{"--ceph-work-dir", c.Dir.Host, "--ceph-cli", c.CLIPath}
	const a, b = "client.rha", "client.rhb"
	caps := v1.CephCaps{Mon: "allow r"}
	cs := cephSet(t, c, ns, "rh", v1.CephOverlapping, v1.CephEntity{Name: a, Caps: caps}, v1.CephEntity{Name: b, Caps: caps})
	cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardManual}
	if err := k8sCreate(t, cs); err != nil {
		t.Fatal(err)
	}
	m := startManagerProcessWith(t, "", flags...)
	waitPhase(t, ns, "rh", v1.PhaseIdle, 1)
	rotate(t, ns, "rh", "r1")
	waitPhase(t, ns, "rh", v1.PhaseDistributed, 1)
	m.stop()

	m = startManagerProcessWith(t, "abort/phase-idle", flags...)
	annotate(t, ns, "rh", engine.AbortAnnotation, "r1")
	m.waitKilled(t, "abort/phase-idle")
	if cs = getSet(t, ns, "rh"); !cs.Status.ResetPending {
		t.Fatalf("killed once the rollback was recorded, yet no reset is owed: %s", stateOf(cs))
	}
	handRotate(t, c, a+".1")

	m = startManagerProcessWith(t, "", flags...)
	note := waitEventNoting(t, ns, "rh", reason.PendingRejected, "to take the cluster's key")
	// What a person reads as the step outside a rotation ("at rest", as
	// the message said before), with what it lists beside the entity.
	named := regexp.MustCompile(`(?:otherwise|at rest) delete (\S+) from the source Secret(?: \(with (.+), if it holds them\))?`).FindStringSubmatch(note)
	if named == nil {
		t.Fatalf("the refusal names nothing to delete from the source Secret: %q", note)
	}
	drop := append([]string{named[1]}, strings.FieldsFunc(strings.ReplaceAll(named[2], " and ", ", "), func(r rune) bool { return r == ',' || r == ' ' })...)
	observed(t, "the rollback's verification refused after %s.1 was rotated by hand; deleting what it names from the source Secret: %v", a, drop)
	editSource(t, cs, func(data map[string][]byte) {
		for _, k := range drop {
			delete(data, k)
		}
	})
	eventually(t, 3*time.Minute, "rh back to Idle with no reset owed", func() (bool, string) {
		cs := getSet(t, ns, "rh")
		return cs.Status.Phase == v1.PhaseIdle && !cs.Status.ResetPending, stateOf(cs)
	})
	served := secretData(t, ns, "rh-keys")
	for _, base := range []string{a, b} {
		entity, key := keyOf(t, served[base+".keyring"])
		if !cephAuthenticates(t, c, entity, key) {
			t.Fatalf("%s: the distribution Secret serves %s with a key the mon refuses", base, entity)
		}
		observed(t, "%s served as %s, which the mon accepts", base, entity)
	}
	if got := cephEntities(t, c, b+"."); !slices.Equal(got, []string{b + ".1"}) {
		t.Fatalf("after the reset the mon has %v, want %s.1 alone (r1's generation removed)", got, b)
	}
	m.stop()
}
