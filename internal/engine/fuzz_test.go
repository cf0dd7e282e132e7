package engine

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Annotations and status come from outside: whatever they hold, Decide
// must keep the state machine's rules.
func FuzzDecide(f *testing.F) {
	f.Add(uint8(0), "", "", "", "", "", "", false, false, false, uint8(0))
	f.Add(uint8(2), "r1", "old", "r1", "r1", "", "", true, false, true, uint8(1))
	f.Add(uint8(1), "r1", "old", "r2", "", "r1", "x", false, true, false, uint8(2))
	f.Fuzz(func(t *testing.T, phase uint8, id, last, rot, dis, abort, rec string, applied, discarded, rolled bool, pending uint8) {
		st := v1.CredentialSetStatus{Phase: []v1.RotationPhase{v1.PhaseIdle, v1.PhaseRotating, v1.PhaseDistributed, ""}[phase%4],
			RotationID: id, LastRotationID: last, RotateApplied: applied, DiscardApplied: discarded}
		in := Input{Status: st, RotateRequest: rot, DiscardRequest: dis, AbortRequest: abort, RecoverRequest: rec,
			Pending: PendingState(pending % 4), RolloutDone: rolled, Policy: v1.DiscardManual}
		d := Decide(in)
		switch d.Action {
		case StartRotation:
			if d.RotationID == "" || d.RotationID == last || (st.Phase != v1.PhaseIdle && st.Phase != "") {
				t.Fatalf("started rotation %q from %+v", d.RotationID, in)
			}
		case Discard:
			if !st.DiscardApplied && (!rolled || in.Pending != PendingMatch || !applied || st.Phase != v1.PhaseDistributed) {
				t.Fatalf("discarded without the gate, the pending secrets or phase 1: %+v", in)
			}
		case Rollback:
			if st.DiscardApplied {
				t.Fatalf("rolled back after the old secrets were discarded: %+v", in)
			}
		case Refuse:
			if d.Reason == "" || d.Message == "" {
				t.Fatalf("refusal without reason or message: %+v", d)
			}
		}
	})
}

// Whatever a source Secret holds, staging and confirming keep every other
// key and never mix current with pending.
func FuzzSourceSecret(f *testing.F) {
	f.Add("A", "cur", "pend", "r1", "OTHER", "x")
	f.Add("ROTATION_ID", "", "", "", "A_PENDING", "y")
	f.Fuzz(func(t *testing.T, key, cur, pend, id, otherKey, otherVal string) {
		if key == "" || pend == "" || key == RotationIDKey || otherKey == key || otherKey == PendingKey(key) || otherKey == RotationIDKey {
			return
		}
		data := map[string][]byte{key: []byte(cur), otherKey: []byte(otherVal)}
		staged := WithPending(data, Secrets{key: pend}, id)
		if got := InspectPending(staged, []string{key}, id); got != PendingMatch {
			t.Fatalf("staged data inspects as %v", got)
		}
		done := Confirm(staged, []string{key})
		if string(done[key]) != pend || string(done[otherKey]) != otherVal {
			t.Fatalf("confirm lost data: %q", done)
		}
		if InspectPending(done, []string{key}, id) != PendingNone {
			t.Fatal("confirm left rotation keys")
		}
		back := WithoutPending(staged, []string{key})
		if string(back[key]) != cur || InspectPending(back, []string{key}, id) != PendingNone {
			t.Fatalf("rollback changed current or kept pending: %q", back)
		}
	})
}
