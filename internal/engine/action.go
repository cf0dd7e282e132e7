package engine

// Action is what the controller should do next for a CredentialSet.
type Action int

const (
	// None: nothing to do.
	None Action = iota
	// DropRotateRequest: remove the rotate annotation, nothing else.
	DropRotateRequest
	// DropDiscardRequest: remove the discard annotation, nothing else.
	DropDiscardRequest
	// StartRotation: pre-check, then compare-and-set Idle → Rotating.
	StartRotation
	// ContinueRotation: stage pending secrets, apply, distribute, → Distributed.
	ContinueRotation
	// Discard: retire old secrets, confirm pending, → Idle.
	Discard
	// Wait: requeue after Decision.Requeue without changing anything.
	Wait
	// Refuse: emit the refusal; Decision says which annotations to drop.
	Refuse
	// Rollback: compare-and-set → Idle with resetPending, then the
	// recovery order that locks no one out: status, Secret, rollout,
	// backend.
	Rollback
	// Recover: mark an idle set resetPending.
	Recover
	// Reset: the consumers run the current secrets again; reset the
	// backend to accept only those.
	Reset
	// DropAbortRequest: remove an abort request that was served already.
	DropAbortRequest
	// ReadBackRotation: read the active rotation's new secrets back from
	// the backend that minted them (ReadBack), as step Applying, then
	// distribute them again (readBackOwed).
	ReadBackRotation
)

func (a Action) String() string {
	return [...]string{"None", "DropRotateRequest", "DropDiscardRequest", "StartRotation",
		"ContinueRotation", "Discard", "Wait", "Refuse", "Rollback", "Recover", "Reset", "DropAbortRequest", "ReadBackRotation"}[a]
}
