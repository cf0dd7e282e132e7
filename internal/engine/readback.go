package engine

import "fmt"

// readBackOwed: the source Secret lost the active rotation's new secrets
// (or a person deleted them, as a refusal asks when the backend's key was
// changed outside rekey), after a backend that mints its keys (ReadBack)
// applied them and before they were confirmed. The backend holds the keys
// (the only ones that work, if it replaced them in place): its Apply hands
// them back when nothing pending is stored, and consumers restart onto
// them. Backends whose secrets rekey mints refuse: those are lost, and
// recover restores the old ones, which still work.
func readBackOwed(in Input) bool {
	st := in.Status
	return in.ReadBack && st.RotateApplied && !st.DiscardApplied &&
		(in.Pending == PendingNone || in.Pending == PendingPartial)
}

// rollbackRefused: rolling rotation id back would restart the consumers
// onto current secrets the backend refuses (Input.CurrentRefused: a key
// changed outside rekey since the rotation began), while the rotation's
// own secrets work. The backend's refusal is left out: its way out is for
// a set at rest.
func rollbackRefused(id string) string {
	return fmt.Sprintf("rotation %s is not rolled back: the backend no longer accepts the current secrets (changed outside rekey since the rotation began), so consumers restarted onto them would be refused, while the rotation's new secrets work", id)
}
