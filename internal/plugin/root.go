// Package plugin is the `kubectl rekey` plugin. It only reads CredentialSets
// and writes the same trigger annotations a user could write with kubectl
// annotate; the operator does all the work. `show` is the only command that
// prints a secret.
package plugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// Options are what a caller injects: where output goes, for tests a clock.
type Options struct {
	Out, Err io.Writer
	// In is where recover reads its confirmation (default os.Stdin).
	In io.Reader
	// Now is the clock for ages and elapsed times (default time.Now).
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Err == nil {
		o.Err = os.Stderr
	}
	if o.In == nil {
		o.In = os.Stdin
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// defaultTimeout bounds --wait; discard waits for consumer rollouts, which
// can take a while for big StatefulSets.
const defaultTimeout = 15 * time.Minute

// Main runs the plugin with args (without the program name) and returns
// the process exit code.
func Main(ctx context.Context, args []string, o Options) int {
	o.defaults()
	root := NewRootCommand(o)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(o.Err, "error:", err)
		return 1
	}
	return 0
}

// NewRootCommand builds the command tree. Errors are returned, not printed:
// Main prints them once, without the usage text that would bury them.
func NewRootCommand(o Options) *cobra.Command {
	o.defaults()
	a := &app{opts: o, flags: genericclioptions.NewConfigFlags(true)}
	root := &cobra.Command{
		Use:   "kubectl-rekey",
		Short: "Rotate the credentials of rekey CredentialSets",
		Long: `kubectl rekey rotates the credentials of a rekey CredentialSet in two steps:
` + helpRow("rotate", "new credentials ("+madeWords()+") are made and distributed; rotate --help says what stays of the old ones") + `  discard  once consumers rolled out, the old credentials are retired
and rolls a rotation back when needed:
  abort    consumers return to the current credentials, then the new ones
           stop working
  recover  diagnoses a refusal and has the operator repair it
and records outside consumers moving to new credentials:
  ack      members of a consumer group now use the current credentials
and verifies, before a rotation, that it would find what it needs:
  check    the operator checks every instance and consumer with the
           set's own credentials, and says how to fix what fails
Each only writes an annotation (rekey.io/rotate, /discard, /abort, /recover,
/check), exactly as kubectl annotate could; the rekey operator does the work.
status and show print tables or text, or the object with -o json, yaml or
jsonpath, as kubectl get does.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl rekey"},
		// cobra's default completion command stays: kubectl rekey
		// completion bash|zsh|fish|powershell. kubectl (1.26+) completes
		// plugins through kubectl_complete-rekey on PATH (hack/krew).
	}
	root.SetOut(o.Out)
	root.SetErr(o.Err)
	// kubectl's own global flags, from kubectl's own library, with its
	// defaults: KUBECONFIG, the current context and its namespace unless
	// overridden; --context, --cluster, --user, --as, --as-group, --token,
	// --server, --request-timeout, the TLS files. (show's own --user, the
	// identity a backend picks with it, shadows kubectl's there.)
	a.flags.AddFlags(root.PersistentFlags())
	registerFlagCompletions(root, a)
	root.AddCommand(newRotateCommand(a), newDiscardCommand(a), newStatusCommand(a), newShowCommand(a),
		newAbortCommand(a), newRecoverCommand(a), newAckCommand(a), newCheckCommand(a), newVersionCommand(o))
	addNameCompletion(root, a)
	return root
}

// app holds what the flags parsed into until a command opens a session.
type app struct {
	opts  Options
	flags *genericclioptions.ConfigFlags
}

// nameArg requires exactly one CredentialSet name, saying how to find one.
func nameArg(verb string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return fmt.Errorf("%s needs the name of a CredentialSet: kubectl rekey %s NAME (list them with kubectl rekey status)", verb, verb)
		case len(args) > 1:
			return fmt.Errorf("%s takes one CredentialSet name, got %d: %v", verb, len(args), args)
		}
		return nil
	}
}

// waitFlags are --wait and --timeout, shared by rotate and discard.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (w *waitFlags) bind(cmd *cobra.Command, until string) {
	cmd.Flags().BoolVar(&w.wait, "wait", false, "follow the request until "+until+", printing progress")
	cmd.Flags().DurationVar(&w.timeout, "timeout", defaultTimeout, "how long --wait follows before giving up (the operator goes on regardless)")
}

func (w *waitFlags) check(cmd *cobra.Command) error {
	if cmd.Flags().Changed("timeout") && !w.wait {
		return fmt.Errorf("--timeout only applies with --wait: add --wait")
	}
	if w.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, e.g. --timeout 10m")
	}
	return nil
}
