package plugin

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/duration"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// stepCell is how many characters of a next step the status table shows:
// a condition's message can run to hundreds, which breaks the table.
const stepCell = 80

// tableStep is the NEXT STEP cell: the next step, cut to fit at a word,
// saying that -v has the rest.
func tableStep(cs *v1.CredentialSet, now time.Time) string { return shortStep(nextStep(cs, now)) }

// shortStep is step cut to fit the table, at a word, saying where the
// rest is.
func shortStep(step string) string {
	if utf8.RuneCountInString(step) <= stepCell {
		return step
	}
	const more = " … (-v: in full)"
	cut := []rune(step)[:stepCell-utf8.RuneCountInString(more)]
	s := string(cut)
	if i := strings.LastIndexByte(s, ' '); i > stepCell/2 {
		s = s[:i]
	}
	return strings.TrimRight(s, " ,;:") + more
}

// writeDetails prints, under the table, what -v adds for each set: the
// full next step, what it waits for and until when, the conditions, the
// instances and users as the last check found them, and the consumers.
func writeDetails(out io.Writer, sets []v1.CredentialSet, now time.Time) {
	for i := range sets {
		cs := &sets[i]
		fmt.Fprintf(out, "\n%s:\n  next step: %s\n", setRef(cs), nextStep(cs, now))
		if w := waitDetail(cs, now); w != "" {
			fmt.Fprintf(out, "  waiting: %s\n", w)
		}
		fmt.Fprintf(out, "  accepted: %s\n", acceptedGenerations(cs))
		if len(cs.Status.Conditions) > 0 {
			fmt.Fprintln(out, "  conditions:")
			for _, c := range cs.Status.Conditions {
				fmt.Fprintf(out, "    %s=%s %s (%s ago): %s\n", c.Type, c.Status, c.Reason,
					duration.HumanDuration(now.Sub(c.LastTransitionTime.Time)), orDash(c.Message))
			}
		}
		writeChecked(out, cs, now)
		writeConsumers(out, cs, now)
	}
}

// acceptedGenerations says which credential generations the backend
// accepts, as the status records the rotation's progress.
func acceptedGenerations(cs *v1.CredentialSet) string {
	st := cs.Status
	g, t := st.KeyGeneration, targetGeneration(cs)
	switch {
	case g == 0:
		return "nothing yet: generation 1 is not provisioned"
	case st.ResetPending:
		return fmt.Sprintf("generation %d, and whatever the rolled-back rotation applied until the reset", g)
	case st.Phase == v1.PhaseRotating && !st.RotateApplied:
		return fmt.Sprintf("generation %d (generation %d is being applied)", g, t)
	case st.DiscardApplied:
		return fmt.Sprintf("generation %d only", t)
	case st.DiscardStarted:
		return fmt.Sprintf("generation %d (generation %d is being retired)", t, g)
	case st.RotateApplied && !traits(cs).Overlap:
		return fmt.Sprintf("generation %d only (rotated in place: generation %d no longer works)", t, g)
	case st.RotateApplied:
		return fmt.Sprintf("generations %d and %d", g, t)
	}
	return fmt.Sprintf("generation %d", g)
}

// writeChecked prints the instances and users as the last kubectl rekey
// check found them (status.check): rekey records nothing per instance
// otherwise, so the age of that answer is said.
func writeChecked(out io.Writer, cs *v1.CredentialSet, now time.Time) {
	c := cs.Status.Check
	if c == nil {
		fmt.Fprintf(out, "  instances and users: not checked yet (kubectl rekey check %s reaches each with the set's own credentials)\n", cs.Name)
		return
	}
	instances, users := checkedTargets(c.Findings)
	when := fmt.Sprintf("checked %s ago", duration.HumanDuration(now.Sub(c.CheckedAt.Time)))
	if len(instances) > 0 {
		fmt.Fprintf(out, "  instances (%s):\n", when)
		for _, t := range instances {
			fmt.Fprintf(out, "    %s: %s\n", t.name, strings.Join(t.found, "; "))
		}
	}
	if len(users) > 0 {
		fmt.Fprintf(out, "  users (%s):\n", when)
		for _, t := range users {
			fmt.Fprintf(out, "    %s: %s\n", t.name, strings.Join(t.found, "; "))
		}
	}
	if c.Omitted > 0 {
		fmt.Fprintf(out, "  (%d more findings: kubectl rekey check %s prints them)\n", c.Omitted, cs.Name)
	}
}

// checked is what the check found of one instance or user.
type checked struct {
	name  string
	found []string
}

// checkedTargets sorts findings into instances (host:port with reachable,
// tls, version, login, privileges) and users ("user NAME", "login NAME",
// "group NAME" on an instance), in the order found. Findings about the
// set itself or a consumer (printed with the consumers) are left out.
func checkedTargets(fs []v1.CheckFinding) (instances, users []checked) {
	add := func(list []checked, name, found string) []checked {
		for i := range list {
			if list[i].name == name {
				list[i].found = append(list[i].found, found)
				return list
			}
		}
		return append(list, checked{name: name, found: []string{found}})
	}
	for _, f := range fs {
		word := f.Check + " ok"
		switch {
		case !f.OK && f.Fix != "":
			word = f.Check + " FAILED: " + f.Message + " (fix: " + f.Fix + ")"
		case !f.OK:
			word = f.Check + " FAILED: " + f.Message
		case f.Check == "version" && f.Message != "":
			word = f.Message
		}
		kind, name, isUser := strings.Cut(f.Check, " ")
		switch {
		case f.Check == "consumer" || strings.HasPrefix(f.Target, "spec."):
		case isUser && (kind == "user" || kind == "login" || kind == "group"):
			found := "on " + f.Target + " ok"
			if !f.OK {
				found = "on " + f.Target + " FAILED: " + f.Message
			}
			users = add(users, kind+" "+name, found)
		default:
			instances = add(instances, f.Target, word)
		}
	}
	return instances, users
}

// writeConsumers prints each consumer: rolled out since when, or what it
// waits for.
func writeConsumers(out io.Writer, cs *v1.CredentialSet, now time.Time) {
	if len(cs.Status.Consumers) == 0 {
		return
	}
	fmt.Fprintln(out, "  consumers:")
	for _, c := range cs.Status.Consumers {
		state := "waiting"
		if c.RolledOut {
			state = "rolled out"
			if c.MovedAt != nil {
				state += " " + duration.HumanDuration(now.Sub(c.MovedAt.Time)) + " ago"
			}
		}
		if c.Coverage != "" {
			state += ", members " + c.Coverage
		}
		if c.Stuck {
			state += ", STUCK"
		}
		name := c.Name
		if c.Namespace != "" {
			name = c.Namespace + "/" + c.Name
		}
		line := fmt.Sprintf("    %s %s: %s", c.Kind, name, state)
		if c.Message != "" {
			line += " (" + c.Message + ")"
		}
		fmt.Fprintln(out, line)
	}
}
