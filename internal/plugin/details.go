package plugin

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/duration"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// stepCell is how many characters of a problem the status table shows: a
// condition's message can run to hundreds, which breaks the table.
const stepCell = 80

// tableStep is the NEXT STEP cell: rekey's own next steps are written to
// fit (and some carry the command to run), a problem's message is cut.
func tableStep(cs *v1.CredentialSet, now time.Time) string {
	if c := meta.FindStatusCondition(cs.Status.Conditions, reason.CondDegraded); c != nil && c.Status == "True" {
		return shortStep(c.Message)
	}
	return nextStep(cs, now)
}

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
// full next step, the conditions and the consumers.
func writeDetails(out io.Writer, sets []v1.CredentialSet, now time.Time) {
	for i := range sets {
		cs := &sets[i]
		fmt.Fprintf(out, "\n%s:\n  next step: %s\n", setRef(cs), nextStep(cs, now))
		if len(cs.Status.Conditions) > 0 {
			fmt.Fprintln(out, "  conditions:")
			for _, c := range cs.Status.Conditions {
				fmt.Fprintf(out, "    %s=%s %s (%s ago): %s\n", c.Type, c.Status, c.Reason,
					duration.HumanDuration(now.Sub(c.LastTransitionTime.Time)), orDash(c.Message))
			}
		}
		if len(cs.Status.Consumers) > 0 {
			fmt.Fprintln(out, "  consumers:")
			for _, c := range cs.Status.Consumers {
				state := "waiting"
				if c.RolledOut {
					state = "rolled out"
					if c.MovedAt != nil {
						state += " " + duration.HumanDuration(now.Sub(c.MovedAt.Time)) + " ago"
					}
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
	}
}
