package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestCephCapsPromise: spec.ceph.entities[].caps are given to the entities
// rekey creates; an existing entity keeps its own caps through provisioning
// and rotation, and a difference is reported (CapsMatch=False, one
// CapsDiffer Warning naming it) until the spec or the cluster agrees.
func TestCephCapsPromise(t *testing.T) {
	c := testenv.CephForTest(t)
	startManager(t, cp.Config, withCephWorkDir(c))
	ns := newNamespace(t)
	const legacy, minted = "client.caps-legacy", "client.caps-minted"
	if _, err := c.CLI(ctxT(t), "auth", "get-or-create", legacy, "mon", "allow r"); err != nil {
		t.Fatal(err)
	}
	cs := cephSet(t, c, ns, "caps", v1.CephInPlace,
		v1.CephEntity{Name: legacy, Caps: v1.CephCaps{Mon: "allow rw"}},
		v1.CephEntity{Name: minted, Caps: v1.CephCaps{Mon: "allow r", OSD: "allow r pool=caps"}})
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "caps", v1.PhaseIdle, 1)

	diff := legacy + ` has mon caps "allow r", the spec gives "allow rw"`
	waitCapsMatch(t, ns, "caps", "False", string(reason.CapsDiffer), diff, 1)
	mustContain(t, "CapsDiffer event", waitEvent(t, ns, "caps", string(reason.CapsDiffer)), diff)
	if got := cephCaps(t, c, legacy); fmt.Sprint(got) != fmt.Sprint(map[string]string{"mon": "allow r"}) {
		t.Fatalf("rekey changed the adopted entity's caps: %v", got)
	}
	if got := cephCaps(t, c, minted); fmt.Sprint(got) != fmt.Sprint(map[string]string{"mon": "allow r", "osd": "allow r pool=caps"}) {
		t.Fatalf("the entity rekey created has caps %v, not the spec's", got)
	}

	// A rotation changes no caps and repeats no Warning for the same
	// difference.
	rotate(t, ns, "caps", "r1")
	waitPhase(t, ns, "caps", v1.PhaseDistributed, 1)
	discard(t, ns, "caps", "r1")
	waitPhase(t, ns, "caps", v1.PhaseIdle, 2)
	waitCapsMatch(t, ns, "caps", "False", string(reason.CapsDiffer), diff, 2)
	if got := cephCaps(t, c, legacy); got["mon"] != "allow r" {
		t.Fatalf("the rotation changed the adopted entity's caps: %v", got)
	}
	if n := countEvents(t, ns, "caps", string(reason.CapsDiffer)); n != 1 {
		t.Fatalf("%d CapsDiffer events for one difference, want 1", n)
	}

	// The spec made to say what the entity has: the condition clears.
	updateSpec(t, ns, "caps", func(cs *v1.CredentialSet) { cs.Spec.Ceph.Entities[0].Caps.Mon = "allow r" })
	waitCapsMatch(t, ns, "caps", "True", string(reason.CapsEqual), "every entity's caps in the cluster are the spec's", 2)
}

// waitCapsMatch waits for the CapsMatch condition with status, reason, a
// message containing msg, checked at key generation gen.
func waitCapsMatch(t testing.TB, ns, name, status, why, msg string, gen int64) {
	t.Helper()
	// A hang guard: the caps are read by the reconcile after Idle, through
	// Ceph CLI calls that took over a minute each at load ~50 (a make test
	// there gave up after 1 minute with no CapsMatch condition yet).
	eventually(t, 10*time.Minute, "CapsMatch="+status+" ("+why+")", func() (bool, string) {
		cs := getSet(t, ns, name)
		c := condition(cs, reason.CondCapsMatch)
		if c == nil {
			return false, "no CapsMatch condition; " + stateOf(cs)
		}
		ok := string(c.Status) == status && c.Reason == why && strings.Contains(c.Message, msg) &&
			strings.HasSuffix(c.Message, fmt.Sprintf("(checked at key generation %d)", gen)) && c.ObservedGeneration == cs.Generation
		return ok, fmt.Sprintf("%s %s %q (observed generation %d of %d)", c.Status, c.Reason, c.Message, c.ObservedGeneration, cs.Generation)
	})
}

// cephCaps reads an entity's caps from the mon.
func cephCaps(t testing.TB, c *testenv.Ceph, entity string) map[string]string {
	t.Helper()
	out, err := c.CLI(ctxT(t), "auth", "get", entity, "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var entries []struct {
		Caps map[string]string `json:"caps"`
	}
	if err := json.Unmarshal(out, &entries); err != nil || len(entries) != 1 {
		t.Fatalf("ceph auth get %s: %d entries, %v", entity, len(entries), err)
	}
	return entries[0].Caps
}

// countEvents counts the Events of reason why about the set, a folded
// series by its count.
func countEvents(t testing.TB, ns, name, why string) int {
	t.Helper()
	time.Sleep(time.Second) // Events are sent asynchronously
	var list eventsv1.EventList
	if err := k8s.List(ctxT(t), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name != name || e.Reason != why {
			continue
		}
		if e.Series != nil {
			n += int(e.Series.Count)
		} else {
			n++
		}
	}
	return n
}
