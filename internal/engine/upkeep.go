package engine

import v1 "rekey.io/rekey/api/v1alpha1"

// Upkeep is what every reconcile of a provisioned set owes before Decide
// picks the step to run, whatever that step is: the three upkeep steps of
// UpkeepSteps. Decide's input depends on their outcome (whether consumers
// rolled out, whether an instance could be repaired), so they run first,
// decided here from the status and the source Secret alone.
type Upkeep struct {
	// Serve: ServeDistribution writes the distribution Secrets; with the
	// rotation's secrets when UsePending, else with the current ones.
	Serve, UsePending bool
	// Repair is which RepairInstances runs.
	Repair Repair
}

// Repair is the repair of instances a reconcile owes: what keeps every
// instance accepting whatever the consumers may hold, whatever returned
// to the cluster since the last reconcile (an instance scaled back in with
// its old volume, or rebuilt empty from a backup).
type Repair int

const (
	RepairNone Repair = iota
	// RepairCurrent: consumers hold, or are restarting onto, the current
	// secrets only (IdleRepairer): the set is at rest, or a reset is owed
	// with no pending secrets left (a recovery's, or the rollback of a
	// rotation that stored none), or a rotation stored nothing yet
	// (stored before applied, so no instance holds anything else of it).
	RepairCurrent
	// RepairBoth: consumers may hold the current or the pending secrets,
	// and every instance is meant to accept both (Repairer): a rotation
	// before its discard (Apply's work, which an abort may pre-empt), or a
	// rollback whose reset is owed (the source Secret keeps the rotation's
	// secrets until then), or an idle set whose source Secret holds pending
	// secrets for some keys only (a user listed again; the others accept
	// their current secret), until the reset of its recovery.
	RepairBoth
)

// Names of the upkeep steps, as logs and the concepts page give them.
const (
	UpkeepServeDistribution = "ServeDistribution"
	UpkeepRestartConsumers  = "RestartConsumers"
	UpkeepRepairInstances   = "RepairInstances"
)

// UpkeepInfo is one row of the upkeep table.
type UpkeepInfo struct {
	Step string
	// When it runs, and what it does.
	When, Does string
}

// UpkeepSteps is the upkeep table, in the order a reconcile runs it. The
// concepts page's copy is checked against it. Instances are repaired
// first: what is served next is verified against every instance, and one
// that returned empty must not make a served secret look refused.
var UpkeepSteps = []UpkeepInfo{
	{UpkeepRepairInstances, "at rest, during a rotation until its discard starts, and while a reset is owed; not with no instance",
		"make an instance that returned or was rebuilt accept what consumers may hold: the current secrets, or both the current and the rotation's"},
	{UpkeepServeDistribution, "every reconcile, except while a rotation's secrets are not yet accepted everywhere or are missing from the source Secret (what is served stays as it is)",
		"write each distribution Secret: the current secrets, or the rotation's from the moment every instance accepts them"},
	{UpkeepRestartConsumers, "every reconcile",
		"restart each declared consumer that does not run what is served, and record which have rolled out"},
}

// UpkeepOf decides the upkeep of a provisioned set. Once a discard began,
// Retire repairs instead (with pending only). With no instance (scaled to
// 0) nothing can refuse anyone, and a repair would only report "no
// instances" every 10 s with nobody asking. Pending secrets of another
// rotation, or only some of them, were never applied by this one: nothing
// to repair with.
func UpkeepOf(st v1.CredentialSetStatus, pending PendingState, noInstances bool) Upkeep {
	u := Upkeep{}
	u.UsePending, u.Serve = Distribution(st, pending)
	u.Repair = repairOf(st, pending, noInstances)
	return u
}

func repairOf(st v1.CredentialSetStatus, pending PendingState, noInstances bool) Repair {
	idle := st.Phase == v1.PhaseIdle
	switch {
	case st.KeyGeneration == 0 || noInstances || st.DiscardStarted || st.DiscardApplied:
		return RepairNone
	case pending == PendingNone && (idle || st.Phase == v1.PhaseRotating && !st.RotateApplied):
		return RepairCurrent
	case pending == PendingMatch && Active(st):
		return RepairBoth
	case pending == PendingStale && idle && st.ResetPending:
		return RepairBoth
	case pending == PendingPartial && idle:
		// Pending secrets some keys were left with (a user listed again:
		// LeftoverRecoverID): they may be held, so they stay valid until
		// the reset; the other keys accept their current secret.
		return RepairBoth
	}
	return RepairNone
}
