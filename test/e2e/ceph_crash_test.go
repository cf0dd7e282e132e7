package e2e

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestCephInPlaceCrashThenAbort kills the real manager right after `ceph
// auth rotate`, before the new key is stored anywhere: the key is then only
// in the mon, which is where rekey reads it back from. An abort
// asked for at that moment must be refused — status does not know the
// rotation applied, so rekey asks the mon — because rolling back would hand
// consumers a key that no longer exists.
func TestCephInPlaceCrashThenAbort(t *testing.T) {
	c := testenv.CephForTest(t)
	ns := newNamespace(t)
	flags := []string{"--ceph-work-dir", c.Dir.Host, "--ceph-cli", c.CLIPath}
	cs := cephSet(t, c, ns, "app", v1.CephInPlace, v1.CephEntity{Name: "client.app", Caps: v1.CephCaps{Mon: "allow r"}})
	if err := k8sCreate(t, cs); err != nil {
		t.Fatal(err)
	}
	m := startManagerProcessWith(t, "", flags...)
	cs = waitPhase(t, ns, "app", v1.PhaseIdle, 1)
	old := assertCephSecrets(t, c, cs, "client.app")["client.app"]
	m.stop()

	m = startManagerProcessWith(t, "ceph/entity-rotated", flags...)
	rotate(t, ns, "app", "r1")
	m.waitKilled(t, "ceph/entity-rotated")
	onMon, err := c.Key(ctxT(t), "client.app")
	if err != nil {
		t.Fatal(err)
	}
	cs = getSet(t, ns, "app")
	if onMon == old {
		t.Fatal("killed after auth rotate, but the mon still has the old key")
	}
	if _, ok := sourceData(t, cs)["client.app"+engine.PendingSuffix]; ok || cs.Status.RotateApplied {
		t.Fatalf("the crash came before the new key was stored, yet rekey recorded it: %s", stateOf(cs))
	}

	annotate(t, ns, "app", engine.AbortAnnotation, "r1")
	m = startManagerProcessWith(t, "", flags...)
	mustContain(t, "AbortSkipped", waitEvent(t, ns, "app", string(reason.AbortSkipped)), "replaced the secrets in place")
	cs = waitPhase(t, ns, "app", v1.PhaseDistributed, 1)
	_, pending := keyOf(t, sourceData(t, cs)["client.app"+engine.PendingSuffix])
	if pending != onMon {
		t.Fatal("the stored pending key is not the one the mon minted before the crash: it was rotated twice or guessed")
	}
	if string(secretData(t, ns, "app-keys")["client.app.key"]) != onMon {
		t.Fatal("consumers are not given the key the mon holds")
	}
	discard(t, ns, "app", "r1")
	cs = waitPhase(t, ns, "app", v1.PhaseIdle, 2)
	if assertCephSecrets(t, c, cs, "client.app")["client.app"] != onMon {
		t.Fatal("generation 2 is not the key minted before the crash")
	}
	m.stop()
}
