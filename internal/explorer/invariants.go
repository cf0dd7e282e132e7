package explorer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// Invariant is a rule checked in every state: "" when it holds, else what
// is wrong.
type Invariant struct {
	Name  string
	Check func(w *World) string
}

// Invariants are the rules that must hold at every instant.
func Invariants() []Invariant {
	return []Invariant{
		{"no lockout", noLockout},
		{"admin accepted", adminAccepted},
		{"nothing left valid after deletion", nothingLeftValid},
		{"nothing lost", recoverable},
		{"no dead end", noDeadEnd},
		{"no wedge", noWedge},
		{"scheduled rotations start in a window", startsInWindow},
		{"no phase starts during a switchover", noStartDuringSwitch},
	}
}

// noLockout: every instance accepts what the consumer's pod holds, except
// a user a person changed by hand (their doing, not rekey's). An instance
// that returned to the cluster (scaled back in with an old volume, or
// rebuilt empty) holds what it held, which no rule of rekey's can prevent:
// it is held to the rule from the set's next reconcile after its return on.
func noLockout(w *World) string {
	for _, in := range w.held() {
		if w.unreached(in) {
			continue // nobody reaches it; not yet reconciled since it returned; or rekey cannot log in there
		}
		for k, pw := range loginsOf(w, podHolds(w)) {
			if a := in.acct(k); !a.Hand && !a.Accepts(pw) && !lostElsewhere(w, in, pw) && !inPlaceWindow(w, pw) {
				return fmt.Sprintf("the consumer's pod holds %s=%s, which %s refuses", k, pw, in.Name)
			}
		}
	}
	return ""
}

// adminAccepted: rekey's own admin logs in everywhere with a password the
// source Secret holds (current or pending), unless a restore from backup
// dropped the one it has.
func adminAccepted(w *World) string {
	if w.cephAdmin() {
		return cephAdminAccepted(w)
	}
	if w.Source == nil || w.Set.Status.KeyGeneration == 0 || woundDown(w) || w.FixedAdmin {
		return ""
	}
	cur, pending := string(w.Source.Data[AdminKey]), string(w.Source.Data[engine.PendingKey(AdminKey)])
	for _, in := range w.held() {
		if w.unreached(in) {
			continue
		}
		a := in.acct(AdminKey)
		if slices.ContainsFunc(w.Lost, a.Accepts) {
			continue // a restore from an older backup dropped it: the user's doing
		}
		if !a.Accepts(cur) && !a.Accepts(pending) {
			return fmt.Sprintf("%s refuses the admin's passwords the source Secret holds", in.Name)
		}
	}
	return ""
}

// recoverable: every password an instance accepts (also one scaled in,
// whose volume may return) is in the source or the distribution Secret.
func recoverable(w *World) string {
	if w.Set.Status.KeyGeneration == 0 || emptied(w) {
		// A wound-down set keeps no copy on purpose: nothing left valid
		// after deletion checks that only what consumers hold stays.
		return ""
	}
	known := map[string]bool{}
	for _, v := range w.Lost {
		known[v] = true
	}
	if w.Source != nil {
		for _, v := range w.Source.Data {
			known[string(v)] = true
		}
	}
	if w.Dist != nil {
		for _, v := range w.Dist.Data {
			known[string(v)] = true
		}
	}
	for _, in := range w.Instances {
		if !in.Present || w.returned(in) || w.stranded(in) || !listedIn(w.Set, in.Name) || pgLagging(w, in) {
			// Away, its passwords do not count until it returns: rekey sets
			// a user that missed what the set did since back to the
			// current password at its next reconcile then.
			continue
		}
		// A rollback's secrets its reset could not reach here are excused
		// (noteUnreset): reported, and recover resets them.
		for k, a := range in.Users {
			if a.Hand || !a.Exists || w.FixedAdmin && k == AdminKey || !w.mine(k) || w.ceph() && (a.Marked || byPerson(a.Primary)) || w.cephInPlace() {
				// Ceph mints its keys and rekey reads them back
				// (Traits.ReadBack): an entity recorded for the set is
				// recoverable from the cluster itself, and so is the
				// InPlace entity, which stays (it was there before rekey).
				// A key a person made by hand is theirs to keep.
				continue
			}
			for _, pw := range []string{a.Primary, a.Secondary} {
				if pw != "" && !known[pw] && !slices.Contains(w.Unreset, in.Name+"="+pw) {
					return fmt.Sprintf("%s accepts %s=%s, which no Secret holds", in.Name, k, pw)
				}
			}
		}
	}
	return ""
}

// Commands a refusal may name as the next step, and the phrasings that
// name them so (a message may also mention a command as an aside).
const (
	recoverCmd = "kubectl rekey recover"
	abortCmd   = "kubectl rekey abort"
)

var nextStep = map[string][]string{
	recoverCmd: {"run kubectl rekey recover", "kubectl rekey recover does this", "reset the user to the source Secret's (kubectl rekey recover)"},
	abortCmd:   {"run kubectl rekey abort", "kubectl rekey abort rolls back"},
}

func warned(w *World, cmd string) bool { return mentions(w.Warnings, cmd) }

// mentions: one of msgs names cmd as the next step.
func mentions(msgs []string, cmd string) bool {
	for _, m := range msgs {
		for _, p := range nextStep[cmd] {
			if strings.Contains(m, p) {
				return true
			}
		}
	}
	return false
}

// namingAbort are w's messages that name abort as the next step: its
// refusals, and (with CheckDeletionWaiting) the DeletionWaiting events of
// a set still in flight.
func namingAbort(w *World) []string {
	var out []string
	for _, m := range w.Warnings {
		if mentions([]string{m}, abortCmd) {
			out = append(out, m)
		}
	}
	if CheckDeletionWaiting && inFlight(w) {
		for _, m := range w.Waiting {
			if mentions([]string{m}, abortCmd) {
				out = append(out, m)
			}
		}
	}
	return out
}

// CheckDeletionWaiting: no dead end also holds the DeletionWaiting event
// to the abort it names (it named abort where abort was refused or had
// nothing to abort, until the event learnt to tell).
var CheckDeletionWaiting = true

// inFlight: a set being deleted still has a rotation (or its reset) in
// flight, which its DeletionWaiting event says abort can end.
func inFlight(w *World) bool { return !w.Gone && engine.RotationInFlight(w.Set.Status) }

// noDeadEnd: a refusal that names recover or abort as the next step
// names one the state accepts: taking it is not refused in turn.
func noDeadEnd(w *World) string {
	if warned(w, recoverCmd) {
		c := w.Clone()
		c.Set.Annotations[engine.RecoverAnnotation] = "check"
		if refused := follow(c, func(c *World) bool { return c.Set.Status.LastRecoverID == "check" }); refused != "" {
			return fmt.Sprintf("a refusal says to run %s (%s), and recover is then refused: %s", recoverCmd, first(w.Warnings), refused)
		}
	}
	if msgs := namingAbort(w); len(msgs) > 0 {
		id := w.Set.Status.RotationID
		if id == "" {
			return fmt.Sprintf("a refusal says to run %s (%s), but no rotation is active to abort", abortCmd, msgs[0])
		}
		c := w.Clone()
		c.Set.Annotations[engine.AbortAnnotation] = id
		if refused := follow(c, func(c *World) bool { return c.Set.Status.LastRolledBackID == id }); refused != "" {
			return fmt.Sprintf("a refusal says to run %s (%s), and abort is then refused: %s", abortCmd, msgs[0], refused)
		}
	}
	return ""
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// follow reconciles c (at most three times) until served says the request
// was taken; otherwise what refused it.
func follow(c *World, served func(*World) bool) string {
	for _, in := range c.Instances {
		// An instance that does not answer holds every step alike, and
		// the step resumes by itself when it answers: a wait, not a
		// refusal.
		in.Down = false
	}
	pgResume(c)
	var last []string
	for i := 0; i < 3; i++ {
		if _, err := c.Reconcile(""); err != nil && len(c.Warnings) == 0 {
			last = []string{err.Error()}
		}
		if served(c) || c.Gone {
			// Taken, or the set let go (deletionPolicy Retain): nothing
			// is left to refuse it.
			return ""
		}
		if len(c.Warnings) > 0 {
			last = c.Warnings
		}
		for _, m := range c.Warnings {
			if strings.HasPrefix(m, string(reason.AbortSkipped)+":") {
				return m
			}
		}
	}
	return "not served after 3 reconciles: " + strings.Join(last, "; ")
}

// drainSteps bounds the user's way back to Idle.
const drainSteps = 24

// drained memoises states known to drain back to Idle, keyed by
// drainKey: the hash leaves out what the drain also reads.
var drained = map[string]bool{}

// drainKey is what the drain's next actions depend on: the state, the
// Warnings it reads its next step from (not part of the state's hash), and
// the recovers it has left. Keyed by the hash alone, a state reached with
// other Warnings or fewer recovers left took another's verdict.
func drainKey(c *World, recovers int) string {
	return c.Hash() + "|" + strconv.Itoa(recovers) + "|" + strings.Join(c.Warnings, "\x00")
}

// noWedge: from the state, the documented user actions (restart the
// consumers, discard with the active ID, run what a refusal names, set a
// hand-changed user back as rekey's message says) return the set to Idle
// within drainSteps steps; a deleted set, to gone.
func noWedge(w *World) string {
	if staleRestore(w) {
		return ""
	}
	c := w.Clone()
	c.Warnings = w.Warnings
	var trace []string
	var seen []string
	recovers := 0
	for i := 0; i < drainSteps; i++ {
		h := drainKey(c, recovers)
		if drained[h] {
			break
		}
		seen = append(seen, h)
		if settled(c) {
			break
		}
		step := drainStep(c, &recovers)
		trace = append(trace, step+" -> "+c.Summary()+warningsNote(c))
		if i == drainSteps-1 {
			what := "back to Idle"
			if c.deleted() {
				what = "to an end (the set deleted, rekey's finalizer never goes)"
			}
			return "the documented actions do not bring the set " + what + "; the last of them:\n      " + strings.Join(trace[len(trace)-6:], "\n      ")
		}
	}
	for _, h := range seen {
		drained[h] = true
	}
	return ""
}

// settled: a set is Idle with nothing pending and its consumers rolled
// out; a deleted one is gone.
func settled(c *World) bool {
	if c.deleted() {
		return c.Gone
	}
	st := c.Set.Status
	return st.Phase == v1.PhaseIdle && !st.ResetPending && c.Pod.Template == c.template() && specServed(c) && !inPlaceOpen(c) && !handOpen(c)
}

func warningsNote(w *World) string {
	if len(w.Warnings) == 0 {
		return ""
	}
	return "  [" + strings.Join(w.Warnings, " | ") + "]"
}
