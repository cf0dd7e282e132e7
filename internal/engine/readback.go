package engine

// readBackOwed: the source Secret lost the active rotation's new secrets
// (or a person deleted them, as a refusal asks when the backend's key was
// changed outside rekey), after a backend that replaces its keys in place
// applied them and before they were confirmed. The backend holds the only
// keys that work (the old ones died at Apply): its Apply hands them back
// when nothing pending is stored, and consumers restart onto them. Other
// backends refuse: their old secrets still work, and recover restores them.
func readBackOwed(in Input) bool {
	st := in.Status
	return in.ReadBack && !in.Overlap && st.RotateApplied && !st.DiscardApplied &&
		(in.Pending == PendingNone || in.Pending == PendingPartial)
}
