package explorer

import (
	"fmt"
	"slices"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// The documented actions "no wedge" takes (noWedge), one at a time.

// drainStep takes the next documented action on c and names it.
func drainStep(c *World, recovers *int) string {
	for _, in := range c.present() {
		if in.Down {
			in.Down = false
			return in.Name + " answers again (what an unreachable instance's refusal waits for)"
		}
	}
	if step := pgResume(c); step != "" {
		return step
	}
	if step := finishSwitch(c); step != "" {
		return step + " (what a ClusterUnhealthy refusal waits for)"
	}
	for _, in := range c.present() {
		if c.stranded(in) && c.Source != nil {
			unstrand(c, in)
			return "DBA sets the admin's password on " + in.Name + " to the current one, as the refusal says"
		}
	}
	for _, in := range c.present() {
		if handFix(in.Name)(c) {
			return "DBA sets APP on " + in.Name + " back to the current password"
		}
	}
	if step := rabbitFixStep(c); step != "" {
		return step
	}
	if step := createMissing(c); step != "" {
		return step
	}
	if step := dropFromSource(c); step != "" {
		dropNamedPending(c)
		return step
	}
	if c.Pod.Template != c.template() {
		restartPod(c)
		return "consumer pod restarts"
	}
	if c.deleted() && c.Set.Spec.OnDeletion() != v1.DeletionRetain && says(c, "set spec.deletionPolicy to Retain") {
		c.Set.Spec.DeletionPolicy = v1.DeletionRetain
		return "user: sets deletionPolicy Retain, as the warning says"
	}
	if saysDeleteConsumers(c) && deleteConsumer(c) {
		return "user: deletes the consumer Deployment, as the warning says"
	}
	st := c.Set.Status
	switch {
	case saysRemoveRecover(c) && c.Set.Annotations[engine.RecoverAnnotation] != "":
		delete(c.Set.Annotations, engine.RecoverAnnotation)
		return "user: removes the recover request, as the refusal says"
	case warned(c, recoverCmd) && *recovers < 2:
		*recovers++
		id := fmt.Sprintf("drain%d", *recovers)
		c.Set.Annotations[engine.RecoverAnnotation] = id
		return "user: recover " + id
	case warned(c, abortCmd) && st.RotationID != "" && c.Set.Annotations[engine.AbortAnnotation] != st.RotationID:
		c.Set.Annotations[engine.AbortAnnotation] = st.RotationID
		return "user: abort " + st.RotationID
	case st.Phase == v1.PhaseDistributed && st.RotateApplied && c.Set.Annotations[engine.DiscardAnnotation] != st.RotationID:
		c.Set.Annotations[engine.DiscardAnnotation] = st.RotationID
		return "user: discard " + st.RotationID
	}
	_, _ = c.Reconcile("")
	return "reconcile"
}

// says: one of w's Warnings says phrase.
func says(w *World, phrase string) bool {
	return slices.ContainsFunc(w.Warnings, func(m string) bool { return strings.Contains(m, phrase) })
}

// saysRemoveRecover: a refusal asks to remove the recover request (a
// rotation that can only complete).
func saysRemoveRecover(w *World) bool { return says(w, "remove the recover request") }

// saysDeleteConsumers: a deleted set with deletionPolicy Delete waits for
// its consumers to go.
func saysDeleteConsumers(w *World) bool { return says(w, "may still use them: delete those consumers") }

// createMissing is what a discard's refusal for a user missing on an
// instance, with no other instance to prove its new password, asks of a
// person: create it there with the new password from the source Secret.
func createMissing(c *World) string {
	if !slices.ContainsFunc(c.Warnings, func(m string) bool { return strings.Contains(m, "create the user there by hand with the new password") }) || c.Source == nil {
		return ""
	}
	for _, in := range c.held() {
		for _, k := range c.keys() {
			pw := string(c.Source.Data[engine.PendingKey(k)])
			if a := in.acct(k); !a.Exists && pw != "" {
				a.create(pw)
				in.set(k, a)
				return "DBA creates " + k + " on " + in.Name + " with the new password, as the refusal says"
			}
		}
	}
	return ""
}
