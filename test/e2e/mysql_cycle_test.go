package e2e

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestMySQLFullCycle walks the whole rotation cycle for the moco preset and
// checks, at every phase boundary, who can log in with which password, what
// the Secrets hold, and that nothing travelled by binlog.
func TestMySQLFullCycle(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{Downstream: true})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	downUsers, downGTID := userTable(t, c.Downstream), gtidExecuted(t, c.Downstream)
	primaryGTID := gtidExecuted(t, c.Primary)

	cs := mocoSet(t, ns, "moco", c)
	deployConsumers(t, cs, mocoKeys, c.Instances)
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}

	// Provisioning: generation 1, the admin adopted, the 7 others created.
	cs = waitPhase(t, ns, "moco", v1.PhaseIdle, 1)
	src := sourceData(t, cs)
	gen1 := userPasswords(src, mocoKeys, "")
	if len(gen1) != 8 {
		t.Fatalf("source Secret holds %d of 8 passwords", len(gen1))
	}
	if gen1["moco-admin"] != string(secretData(t, ns, "moco-init")["ADMIN_PASSWORD"]) {
		t.Fatal("the admin's existing password was not adopted")
	}
	for u, pw := range gen1 {
		// 32: what MySQL takes as moco-repl's SOURCE_PASSWORD.
		if u != "moco-admin" && (len(pw) != 32 || strings.Trim(pw, engine.PasswordAlphabet) != "") {
			t.Fatalf("generated password of %s is not 32 letters and digits", u)
		}
	}
	loginMatrix(t, "after provisioning", c.Instances(), gen1, nil)
	assertDistributed(t, ns, "moco-creds", gen1)
	eventually(t, 30*time.Second, "Ready=True after provisioning", func() (bool, string) {
		cs := getSet(t, ns, "moco")
		cond := condition(cs, reason.CondReady)
		return cond != nil && cond.Status == "True", stateOf(cs)
	})

	p := startProber(t, c.Instances(), ns, "moco-creds", mocoKeys)
	bk := matrixMark(t, p, "no fault: one full rotation, rotate to discard (baseline)")

	// Phase 1.
	healthy := time.Now()
	rotate(t, ns, "moco", "rot-1")
	cs = waitPhase(t, ns, "moco", v1.PhaseDistributed, 1)
	if !cs.Status.RotateApplied || cs.Status.RotationID != "rot-1" {
		t.Fatalf("after phase 1: %s", stateOf(cs))
	}
	src = sourceData(t, cs)
	pend := userPasswords(src, mocoKeys, engine.PendingSuffix)
	if len(pend) != 8 || string(src[engine.RotationIDKey]) != "rot-1" {
		t.Fatalf("source Secret during rotation: %d pending keys, ROTATION_ID %q", len(pend), src[engine.RotationIDKey])
	}
	if cur := userPasswords(src, mocoKeys, ""); !equalMaps(cur, gen1) {
		t.Fatal("current passwords changed during phase 1")
	}
	both := map[string]string{}
	for u := range gen1 {
		if gen1[u] == pend[u] {
			t.Fatalf("pending password of %s equals the current one", u)
		}
		both[u] = pend[u]
	}
	loginMatrix(t, "Distributed: new passwords", c.Instances(), pend, nil)
	loginMatrix(t, "Distributed: old passwords", c.Instances(), gen1, nil)
	assertDistributed(t, ns, "moco-creds", pend)
	assertSuperReadOnly(t, append(c.Replicas, c.Downstream)...)
	eventually(t, 30*time.Second, "rotate annotation removed", func() (bool, string) {
		_, ok := getSet(t, ns, "moco").Annotations[engine.RotateAnnotation]
		return !ok, "still annotated"
	})
	waitEvent(t, ns, "moco", string(reason.Distributed))

	time.Sleep(time.Second) // a verification window, as an operator would take
	// Phase 2.
	discard(t, ns, "moco", "rot-1")
	cs = waitPhase(t, ns, "moco", v1.PhaseIdle, 2)
	if cs.Status.LastRotationID != "rot-1" || cs.Status.RotationID != "" || cs.Status.RotateApplied || cs.Status.DiscardApplied {
		t.Fatalf("after discard: %s", stateOf(cs))
	}
	loginMatrix(t, "Idle after discard", c.Instances(), pend, gen1)
	src = sourceData(t, cs)
	if cur := userPasswords(src, mocoKeys, ""); !equalMaps(cur, pend) {
		t.Fatal("source Secret's current passwords are not the confirmed pending ones")
	}
	if len(userPasswords(src, mocoKeys, engine.PendingSuffix)) != 0 || src[engine.RotationIDKey] != nil {
		t.Fatal("source Secret kept rotation keys after discard")
	}
	assertDistributed(t, ns, "moco-creds", pend)
	assertSuperReadOnly(t, append(c.Replicas, c.Downstream)...)
	bk.done(t, "completed; time is the whole cycle, a 1 s verification pause included")
	p.assertNoGap(t)
	assertNoWarningSince(t, ns, "moco", healthy, "a healthy rotation")

	// Nothing travelled by binlog: not the provisioning, not the rotation.
	if err := c.Downstream.WaitCaughtUp(c.Primary); err != nil {
		t.Fatal(err)
	}
	if got := userTable(t, c.Downstream); got != downUsers {
		t.Fatal("the downstream cluster's mysql.user changed: credential DDL travelled by binlog")
	}
	if got := gtidExecuted(t, c.Downstream); got != downGTID {
		t.Fatalf("downstream gtid_executed moved from %q to %q", downGTID, got)
	}
	if got := gtidExecuted(t, c.Primary); got != primaryGTID {
		t.Fatalf("primary gtid_executed moved from %q to %q: something was binlogged", primaryGTID, got)
	}

	assertNoSecretLeaked(t, ns, "moco", gen1, pend)

	// A stale rotate annotation (left by a failed removal) starts nothing.
	sk := matrixMark(t, nil, "stale rotate request (a completed rotation's ID) set again")
	rotate(t, ns, "moco", "rot-1")
	eventually(t, 30*time.Second, "stale rotate annotation removed", func() (bool, string) {
		_, ok := getSet(t, ns, "moco").Annotations[engine.RotateAnnotation]
		return !ok, "still annotated"
	})
	if cs = getSet(t, ns, "moco"); cs.Status.Phase != v1.PhaseIdle || cs.Status.KeyGeneration != 2 {
		t.Fatalf("stale annotation changed state: %s", stateOf(cs))
	}
	loginMatrix(t, "after stale annotation", c.Instances(), pend, gen1)
	sk.held(t, "recognised as stale (lastRotationID) and removed; nothing started")

	// A distribution Secret edited by hand is restored on the next
	// reconcile (the resync, or any change of the set).
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "moco-creds"}, s); err != nil {
		t.Fatal(err)
	}
	hk := matrixMark(t, nil, "distributed Secret edited by hand while Idle (a key changed, one deleted)")
	s.Data["ADMIN_PASSWORD"] = []byte("typed-by-hand")
	delete(s.Data, "AGENT_PASSWORD")
	if err := k8s.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	annotate(t, ns, "moco", "test.rekey.io/touch", "after-hand-edit")
	assertDistributed(t, ns, "moco-creds", pend)
	hk.done(t, "restored to the current passwords at the next reconcile (here forced by touching the set)")
}

// assertNoSecretLeaked scans what the operator produced — its log, the
// set's events and status — for any password (no secret outside Secrets).
func assertNoSecretLeaked(t testing.TB, ns, name string, passwords ...map[string]string) {
	t.Helper()
	var hay strings.Builder
	if managerLog != "" {
		b, err := os.ReadFile(managerLog)
		if err != nil {
			t.Fatal(err)
		}
		hay.Write(b)
	}
	var evs eventsv1.EventList
	if err := k8s.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		hay.WriteString(e.Note + e.Reason)
	}
	st, _ := json.Marshal(getSet(t, ns, name))
	hay.Write(st)
	if hay.Len() < 100 {
		t.Fatal("nothing to scan: the log, events and status are empty")
	}
	for _, m := range passwords {
		for u, pw := range m {
			if strings.Contains(hay.String(), pw) {
				t.Fatalf("the password of %s appears in the manager's log, events or status", u)
			}
		}
	}
}

func assertDistributed(t testing.TB, ns, name string, want map[string]string) {
	t.Helper()
	eventually(t, 30*time.Second, "distributed Secret "+name+" holds the expected passwords", func() (bool, string) {
		got := userPasswords(secretData(t, ns, name), mocoKeys, "")
		return equalMaps(got, want), "holds other passwords"
	})
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
