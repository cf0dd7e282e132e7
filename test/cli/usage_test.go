package cli

import (
	"strings"
	"testing"
)

func TestUnknownSet(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	kc := in(t, ns)
	want := `credentialset "nope" not found in namespace "` + ns + `": list the sets there with kubectl rekey status -n ` + ns + "\n"
	for _, args := range [][]string{
		{"rotate", "nope"},
		{"rotate", "nope", "--dry-run"},
		{"rotate", "nope", "--wait"},
		{"discard", "nope"},
		{"discard", "nope", "--wait"},
		{"status", "nope"},
		{"show", "nope"},
	} {
		if r := kc.fails(t, want, args...); r.stderr != "error: "+want {
			t.Errorf("%v: stderr %q, want exactly %q", args, r.stderr, "error: "+want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	kc := in(t, "default")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rotate"}, "rotate needs the name of a CredentialSet: kubectl rekey rotate NAME (list them with kubectl rekey status)"},
		{[]string{"discard"}, "discard needs the name of a CredentialSet: kubectl rekey discard NAME"},
		{[]string{"show"}, "show needs the name of a CredentialSet: kubectl rekey show NAME"},
		{[]string{"rotate", "a", "b"}, "rotate takes one CredentialSet name, got 2: [a b]"},
		{[]string{"discard", "a", "b", "c"}, "discard takes one CredentialSet name, got 3: [a b c]"},
		{[]string{"show", "a", "b"}, "show takes one CredentialSet name, got 2: [a b]"},
		{[]string{"status", "a", "b"}, "status takes at most one CredentialSet name, got 2"},
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "kubectl rekey"`},
		{[]string{"rotat", "orders"}, "Did you mean this?\n\trotate"},
		{[]string{"version", "extra"}, `unknown command "extra" for "kubectl rekey version"`},
		{[]string{"status", "-o", "xml"}, `unknown output format "xml"`},
		{[]string{"--bogus", "status"}, "unknown flag: --bogus"},
		{[]string{"rotate", "orders", "--force"}, "unknown flag: --force"},
		{[]string{"status", "-n"}, "flag needs an argument: 'n' in -n"},
		{[]string{"show", "orders", "--wait"}, "unknown flag: --wait"},
	} {
		if r := kc.fails(t, c.want, c.args...); r.stdout != "" {
			t.Errorf("%v printed on stdout: %q", c.args, r.stdout)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	kc := noConfig // help needs no cluster
	root := []string{
		"kubectl rekey rotates the credentials of a rekey CredentialSet in two steps:",
		"Usage:\n  kubectl rekey [command]\n",
		"  discard ", "  rotate ", "  show ", "  status ",
		"--kubeconfig string", "-n, --namespace string", "--context string",
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {}} {
		r := kc.run(t, args...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("%v: want exit 0 and nothing on stderr:\n%s", args, r)
		}
		contains(t, "kubectl-rekey "+strings.Join(args, " "), r.stdout, root...)
	}
	for _, c := range []struct {
		cmd  string
		want []string
	}{
		{"rotate", []string{"kubectl rekey rotate NAME [flags]", "rekey.io/rotate=<new UUID>", "--dry-run", "--wait", "--timeout duration", "(default 15m0s)", "kubectl rekey rotate moco -n shop --dry-run"}},
		{"discard", []string{"kubectl rekey discard NAME [flags]", "rekey.io/discard=<active rotation ID>", "--wait", "--timeout duration"}},
		{"status", []string{"kubectl rekey status [NAME] [flags]", "one line per CredentialSet"}},
		{"show", []string{"kubectl rekey show NAME [flags]", "--user string", "--format string", `output format: plain, mycnf or env (default "plain")`, "-o, --output string"}},
	} {
		for _, args := range [][]string{{c.cmd, "--help"}, {"help", c.cmd}} {
			r := kc.run(t, args...)
			if r.code != 0 || r.stderr != "" {
				t.Errorf("%v: want exit 0 and nothing on stderr:\n%s", args, r)
			}
			contains(t, "kubectl-rekey "+strings.Join(args, " "), r.stdout, c.want...)
			contains(t, "kubectl-rekey "+strings.Join(args, " "), r.stdout, "Global Flags:", "--kubeconfig string")
		}
	}
}
