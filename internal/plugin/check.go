package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
)

// defaultCheckTimeout bounds how long check waits for the operator's
// answer: it connects to every instance, at most a few seconds each.
const defaultCheckTimeout = 2 * time.Minute

func newCheckCommand(a *app) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check NAME",
		Short: "Verify that a rotation would find what it needs, with the set's own credentials",
		Long: `check asks the operator to run the set's checks and prints what they
found, with the fix for each that failed: per instance, endpoint or
monitor, whether it answers, whether its TLS certificate verifies as the
spec asks, its version, whether the admin has what rekey's commands
need, and whether each user is there or can be adopted; per consumer
workload, whether it exists and rekey may restart it (a CronJob is not
restarted: rekey marks its job template, and it counts as rolled out
once every Job it controls carries the mark or has finished).

When the admin lacks a right, the fix names:
` + backendHelp(func(h registry.Help) string { return h.Check }) + `
The operator runs them, not this command: it holds the set's credentials
and reaches the servers. check annotates the set as
  kubectl annotate credentialset NAME rekey.io/check=$(uuidgen)
would, and waits for status.check to answer it. Nothing else changes.

A rotation runs the same checks before it starts, and is refused
(PreflightFailed) when one fails. The request stays: once check passes,
the rotation starts. check exits non-zero when a check failed.`,
		Example: `  kubectl rekey check moco -n shop
  kubectl rekey check moco -n shop --timeout 5m`,
		Args: nameArg("check"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return fmt.Errorf("--timeout must be positive, e.g. --timeout 2m")
			}
			s, err := a.session()
			if err != nil {
				return err
			}
			return s.check(cmd.Context(), args[0], timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", defaultCheckTimeout, "how long to wait for the operator's answer")
	return cmd
}

func (s *session) check(ctx context.Context, name string, timeout time.Duration) error {
	id := uuid.NewString()
	var cs *v1.CredentialSet
	err := s.request(func() (err error) {
		if cs, err = s.getSet(ctx, name); err != nil {
			return err
		}
		return s.annotate(ctx, cs, engine.CheckAnnotation, id)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(s.opts.Out, "check %s requested for credentialset %s; waiting up to %s for the operator's answer\n", id, setRef(cs), timeout)
	cs, err = s.awaitCheck(ctx, cs, id, timeout)
	if err != nil {
		return err
	}
	res := cs.Status.Check
	printFindings(s.opts.Out, res.Findings, false)
	if res.Omitted > 0 {
		fmt.Fprintf(s.opts.Out, "(%d more passed checks not shown)\n", res.Omitted)
	}
	if req := waitingRotation(cs); req != "" {
		switch {
		case cs.Status.RotationID == req:
			fmt.Fprintf(s.opts.Out, "rotation %s, which was waiting for these checks, has started (follow it with kubectl rekey status %s -n %s)\n", req, name, s.ns)
		case res.Passed:
			fmt.Fprintf(s.opts.Out, "rotation %s was waiting for these checks: it starts now (follow it with kubectl rekey status %s -n %s)\n", req, name, s.ns)
		default:
			fmt.Fprintf(s.opts.Out, "rotation %s waits for these checks: it starts once they pass\n", req)
		}
	}
	if !res.Passed {
		return fmt.Errorf("%s failed: do what FIX says, then run kubectl rekey check %s -n %s again", countFailed(res.Findings), name, s.ns)
	}
	fmt.Fprintf(s.opts.Out, "every check passed\n")
	return nil
}

// awaitCheck follows the set until status.check answers id.
func (s *session) awaitCheck(ctx context.Context, cs *v1.CredentialSet, id string, timeout time.Duration) (*v1.CredentialSet, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var got *v1.CredentialSet
	_, err := watchtools.UntilWithSync(wctx, s.listWatch(&v1.CredentialSetList{}, fields.OneTermEqualSelector("metadata.name", cs.Name)),
		&v1.CredentialSet{}, nil, func(ev watch.Event) (bool, error) {
			if ev.Type == watch.Deleted {
				return false, fmt.Errorf("credentialset %s was deleted while it was checked", setRef(cs))
			}
			next, ok := ev.Object.(*v1.CredentialSet)
			if ok && next.Status.Check != nil && next.Status.Check.ID == id {
				got = next
				return true, nil
			}
			return false, nil
		})
	switch {
	case got != nil:
		return got, nil
	case err != nil && !wait.Interrupted(err) && !errors.Is(err, context.DeadlineExceeded):
		return nil, err
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("timed out after %s waiting for the operator to answer check %s (is it running, and does it watch namespace %s?); nothing was changed: run it again with a longer --timeout, or look at the manager's log", timeout, id, s.ns)
}

// waitingRotation is a rotation request the operator has not started,
// "" when there is none.
func waitingRotation(cs *v1.CredentialSet) string {
	req := cs.Annotations[engine.RotateAnnotation]
	st := cs.Status
	if req == "" || req == st.LastRotationID || req == st.LastRolledBackID || st.Phase == v1.PhaseDistributed && req == st.RotationID {
		return ""
	}
	return req
}

// printFindings prints a table of findings: TARGET, CHECK, RESULT, FIX
// (only failed ones when failedOnly).
func printFindings(out io.Writer, fs []v1.CheckFinding, failedOnly bool) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tCHECK\tRESULT\tFIX")
	for _, f := range fs {
		if failedOnly && f.OK {
			continue
		}
		result := "ok"
		if !f.OK {
			result = "FAILED"
		}
		if f.Message != "" {
			result += ": " + oneLine(f.Message)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", oneLine(f.Target), oneLine(f.Check), result, orDash(oneLine(f.Fix)))
	}
	tw.Flush()
}

// oneLine keeps a cell on its line: a tab or newline would break the table.
func oneLine(s string) string {
	return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
}

func countFailed(fs []v1.CheckFinding) string {
	n := 0
	for _, f := range fs {
		if !f.OK {
			n++
		}
	}
	if n == 1 {
		return "1 check"
	}
	return fmt.Sprintf("%d checks", n)
}

// printLastCheck is rotate --dry-run's account of the checks: the last
// answer and its age, never a new request (a dry run changes nothing).
func printLastCheck(out io.Writer, cs *v1.CredentialSet, now time.Time, ns string) {
	res := cs.Status.Check
	if res == nil {
		fmt.Fprintf(out, "Checks: none has run. A rotation runs them before it starts and is refused if one fails; see them first with kubectl rekey check %s -n %s\n", cs.Name, ns)
		return
	}
	age := now.Sub(res.CheckedAt.Time).Truncate(time.Second)
	if res.Passed {
		fmt.Fprintf(out, "Checks: every check passed %s ago (kubectl rekey check %s -n %s runs them again; a rotation runs them before it starts)\n", age, cs.Name, ns)
		return
	}
	fmt.Fprintf(out, "Checks: %s failed %s ago, and a rotation would be refused until they pass (kubectl rekey check %s -n %s runs them again):\n", countFailed(res.Findings), age, cs.Name, ns)
	printFindings(out, res.Findings, true)
}
