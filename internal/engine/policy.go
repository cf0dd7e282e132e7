package engine

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// PolicyInput is what the rotation policy decision depends on.
type PolicyInput struct {
	Rotation v1.RotationSpec
	Status   v1.CredentialSetStatus
	// Version is the backend's running version, "" when it was not read
	// (only WithVersionUpgrade needs it).
	Version string
	Now     time.Time
}

// PolicyDue is the policy's verdict.
type PolicyDue struct {
	// RotationID is the rotation the policy asks for, "" for none. It is
	// derived from what triggered it, so a crash or a repeated reconcile
	// asks for the same rotation, never a second one.
	RotationID string
	// Why says what triggered it, for the PolicyTriggered event.
	Why string
	// NextAt is when Schedule asks for the next rotation (nil otherwise):
	// when the interval has passed, or, with windows, the first time after
	// that a window is open.
	NextAt *time.Time
	// Window is, with windows, the index of the one NextAt falls in.
	Window int
	// WindowHeld: the scheduled rotation is due, and only a closed
	// maintenance window holds it until NextAt.
	WindowHeld bool
	// Problem is a window the manager cannot read (an unknown time zone):
	// the schedule starts nothing until it is fixed; nothing else waits.
	Problem error
}

// Due decides whether the rotation policy starts a rotation now
// (KeyGeneration, WithVersionUpgrade or Schedule). A rotation the policy asked for and an
// operator aborted is not asked for again: KeyGeneration waits for a higher
// keyGeneration, WithVersionUpgrade for a newer version, Schedule for the
// following interval.
func Due(in PolicyInput) PolicyDue {
	st, rot := in.Status, in.Rotation
	var d PolicyDue
	switch rot.Policy {
	case v1.PolicyKeyGeneration:
		if rot.KeyGeneration != nil && *rot.KeyGeneration > st.KeyGeneration {
			d.RotationID = fmt.Sprintf("keygeneration-%d", *rot.KeyGeneration)
			d.Why = fmt.Sprintf("rotation.keyGeneration %d is above status.keyGeneration %d", *rot.KeyGeneration, st.KeyGeneration)
		}
	case v1.PolicyWithVersionUpgrade:
		switch {
		case in.Version == "":
		case st.KeyVersion == "":
			d.RotationID = "version-" + versionID(in.Version)
			d.Why = fmt.Sprintf("the version that minted the current credentials is unknown; the backend runs %s", in.Version)
		case CompareVersions(in.Version, st.KeyVersion) > 0:
			d.RotationID = "version-" + versionID(in.Version)
			d.Why = fmt.Sprintf("the backend runs %s, newer than %s which minted the current credentials", in.Version, st.KeyVersion)
		}
	case v1.PolicySchedule:
		if rot.Interval == nil || rot.Interval.Duration <= 0 || st.CurrentSince == nil {
			break
		}
		due := st.CurrentSince.Add(rot.Interval.Duration)
		if scheduleID(due) == st.LastRolledBackID {
			due = due.Add(rot.Interval.Duration)
		}
		at, open, err := scheduleStart(rot.Windows, due, in.Now)
		if err != nil {
			d.Problem = err
			break
		}
		d.NextAt, d.Window = &at.At, at.Window
		d.WindowHeld = !open && !in.Now.Before(due) && st.KeyGeneration > 0 && (st.Phase == v1.PhaseIdle || st.Phase == "") && !st.ResetPending
		if open {
			d.RotationID = scheduleID(due)
			d.Why = fmt.Sprintf("the current credentials are older than rotation.interval %s", rot.Interval.Duration)
			if len(rot.Windows) > 0 {
				d.Why += fmt.Sprintf(" and spec.rotation.windows[%d] is open", at.Window)
			}
		}
	}
	if d.RotationID != "" && (st.KeyGeneration == 0 || st.Phase != v1.PhaseIdle && st.Phase != "" ||
		st.ResetPending || d.RotationID == st.LastRolledBackID || d.RotationID == st.LastRotationID) {
		d.RotationID, d.Why = "", ""
	}
	return d
}

// scheduleStart is when a rotation due at due may start, and whether it may
// start now. Only the start waits for a window: once due, the rotation
// starts in the first window open at or after now, and runs to completion
// whenever the window closes. The time reported is stable while nothing
// changes (the due time, or the opening of the window now open, whichever
// is later; else the next opening), so that reconciles within one window
// do not rewrite status.nextRotationAt.
func scheduleStart(ws []v1.RotationWindow, due, now time.Time) (WindowState, bool, error) {
	from := due
	if now.After(due) {
		from = now
	}
	at, err := Windows(ws, from)
	if err != nil {
		return at, false, err
	}
	if at.Open && at.At.Before(due) {
		at.At = due
	}
	return at, at.Open && !now.Before(due), nil
}

// TargetGeneration is the generation the active rotation produces, or,
// with none active, the one a rotation starting now would: the next one,
// or the spec's keyGeneration when that is higher (values may jump, as in
// Rook's keyGeneration). The active rotation's is recorded when it starts
// (status.targetGeneration), so a spec edited meanwhile does not move it;
// status written before that field existed means the next one. An
// unprovisioned set is provisioned at InitialGeneration first. Controller
// and plugin both ask this, so they never disagree on a generation.
func TargetGeneration(rot v1.RotationSpec, st v1.CredentialSetStatus) int64 {
	if Active(st) {
		if st.TargetGeneration > st.KeyGeneration {
			return st.TargetGeneration
		}
		return st.KeyGeneration + 1
	}
	cur := st.KeyGeneration
	if cur == 0 {
		cur = InitialGeneration(rot)
	}
	next := cur + 1
	if rot.Policy == v1.PolicyKeyGeneration && rot.KeyGeneration != nil && *rot.KeyGeneration > next {
		return *rot.KeyGeneration
	}
	return next
}

// InitialGeneration is the generation of the credentials rekey mints when
// it provisions a set: rotation.keyGeneration when policy KeyGeneration asks
// for more than 1, else 1. Fresh keys are already what the spec asks for
// (Rook takes keyGeneration as the generation of the keys it creates), so
// the policy must not rotate them again at once: with a Manual discard that
// would leave a brand-new set waiting in Distributed.
func InitialGeneration(rot v1.RotationSpec) int64 {
	if rot.Policy == v1.PolicyKeyGeneration && rot.KeyGeneration != nil && *rot.KeyGeneration > 1 {
		return *rot.KeyGeneration
	}
	return 1
}

// StartGeneration is the generation a backend reports for the credentials
// it provisioned. initial is InitialGeneration; found is the highest
// generation the keys rekey found carry (e.g. the suffix of an adopted
// entity, 0 for a name without one). Keys found rather than minted keep
// their own generation, even below initial: nobody knows what minted them,
// so the policy then rotates them up to what the spec asks for. When rekey
// minted everything, found can only come from its own earlier attempt (a
// crash during provisioning) and is kept if the spec meanwhile went lower.
func StartGeneration(initial int64, adopted bool, found int64) int64 {
	if adopted {
		return max(found, 0)
	}
	return max(initial, found, 1)
}

func scheduleID(due time.Time) string { return "schedule-" + strconv.FormatInt(due.Unix(), 10) }

// versionID keeps a version usable inside an annotation-like ID.
func versionID(v string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' {
			return r
		}
		return '-'
	}, v)
}

// CompareVersions compares dotted numeric versions ("9.7.4" < "9.10.0");
// a part that is not a number compares as text.
func CompareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		var x, y string
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		nx, ex := strconv.Atoi(x)
		ny, ey := strconv.Atoi(y)
		switch {
		case ex == nil && ey == nil:
			if nx != ny {
				return cmpInt(nx, ny)
			}
		case x != y:
			return strings.Compare(x, y)
		}
	}
	return 0
}

func cmpInt(a, b int) int {
	if a < b {
		return -1
	}
	return 1
}
