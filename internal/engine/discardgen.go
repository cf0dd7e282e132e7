package engine

import v1 "rekey.io/rekey/api/v1alpha1"

// DiscardRequested is the discard request a set carries: its
// rekey.io/discard annotation, or else spec.rotation.discardGeneration when
// it names the generation the active rotation produces, as the active
// rotation's ID. A declared discard is thus the very request kubectl rekey
// discard makes, and passes the same gates in Decide (the rollout, an
// instance count, the pending secrets). It counts only once the rotation is
// Distributed with its new secrets applied: earlier, a request would be
// refused or dropped, and a spec cannot be dropped.
func DiscardRequested(annotation string, rot v1.RotationSpec, st v1.CredentialSetStatus) string {
	if annotation != "" {
		return annotation
	}
	if rot.DiscardGeneration == nil || st.Phase != v1.PhaseDistributed || !st.RotateApplied || st.RotationID == "" {
		return ""
	}
	if *rot.DiscardGeneration != TargetGeneration(rot, st) {
		return ""
	}
	return st.RotationID
}
