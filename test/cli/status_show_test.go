package cli

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// cells splits the status table into rows of cells: tabwriter pads columns
// with at least 3 spaces, and no cell here holds more than single spaces.
func cells(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, regexp.MustCompile(`\s{3,}`).Split(strings.TrimRight(l, " "), -1))
	}
	return rows
}

func TestStatusTable(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	kc := in(t, ns)
	newSet(t, ns, "a-idle")
	status(t, ns, "a-idle", idleAt(3))
	newSet(t, ns, "b-distributed")
	status(t, ns, "b-distributed", distributedAt(2, "r-b"))
	newSet(t, ns, "c-new") // never provisioned: no status at all
	warn(t, ns, "a-idle", "InstanceUnreachable", "instance db-0 is unreachable")
	// An Event written through core/v1 (older recorders) counts as well.
	if err := k8s.Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, GenerateName: "b-distributed-"},
		InvolvedObject: corev1.ObjectReference{APIVersion: v1.GroupVersion.String(), Kind: "CredentialSet", Namespace: ns, Name: "b-distributed", UID: getSet(t, ns, "b-distributed").UID},
		Reason:         "Distributed", Message: "new passwords distributed", Type: corev1.EventTypeNormal,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
		Source: corev1.EventSource{Component: "rekey"},
	}); err != nil {
		t.Fatal(err)
	}

	header := []string{"NAME", "PHASE", "STEP", "GENERATION", "ROTATION", "AGE", "CONSUMERS", "LAST EVENT", "NEXT STEP"}
	all := [][]string{
		header,
		{"a-idle", "Idle", "-", "3", "-", "5h", "1/1", "InstanceUnreachable", "rotate when needed"},
		{"b-distributed", "Distributed", "-", "2", "r-b", "5h", "0/1", "Distributed", "wait for consumers to roll out (0/1)"},
		{"c-new", "-", "-", "0", "-", "-", "-", "-", "wait: the operator has not picked this set up yet"},
	}
	r := kc.ok(t, "status")
	if got := cells(r.stdout); !slices.EqualFunc(got, all, slices.Equal) || r.stderr != "" {
		t.Errorf("status:\n%s\ncells %q\nwant  %q\nstderr %q", r.stdout, got, all, r.stderr)
	}
	r = kc.ok(t, "status", "b-distributed")
	if got := cells(r.stdout); !slices.EqualFunc(got, [][]string{header, all[2]}, slices.Equal) {
		t.Errorf("status b-distributed:\n%s", r.stdout)
	}
	kc.fails(t, "status takes at most one CredentialSet name, got 2: [a-idle c-new]", "status", "a-idle", "c-new")

	// An empty namespace: a note on stderr, exit 0.
	empty := namespace(t)
	r = in(t, empty).ok(t, "status")
	if r.stdout != "" || r.stderr != `no credentialsets in namespace "`+empty+`"`+"\n" {
		t.Errorf("empty namespace: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

func TestShowFormats(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	kc := in(t, ns)
	pws := newSet(t, ns, "orders")
	// A second distribution target with other values: show reads the first.
	cs := getSet(t, ns, "orders")
	cs.Spec.Distribution = append(cs.Spec.Distribution, v1.SecretTarget{Namespace: ns, Name: "orders-copy"})
	if err := k8s.Update(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-copy"},
		Data:       map[string][]byte{"ORDERS_PASSWORD": []byte(password()), "BILLING_PASSWORD": []byte(password())},
	}); err != nil {
		t.Fatal(err)
	}
	status(t, ns, "orders", idleAt(1))
	o, b := pws["ORDERS_PASSWORD"], pws["BILLING_PASSWORD"]

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--user", "orders"}, o + "\n"},
		{[]string{"--user", "orders", "--format", "plain"}, o + "\n"},
		{[]string{"--user", "orders@%", "--format", "mycnf"}, "[client]\nuser=orders\npassword=" + o + "\n"},
		{[]string{"--user", "orders", "--format", "env"}, "MYSQL_USER=orders\nMYSQL_PASSWORD=" + o + "\n"},
		{[]string{"--user", "billing@10.%", "--format", "env"}, "MYSQL_USER=billing\nMYSQL_PASSWORD=" + b + "\n"},
	} {
		r := kc.ok(t, append([]string{"show", "orders"}, c.args...)...)
		if r.stdout != c.want || r.stderr != "" {
			t.Errorf("show %v: stdout %q, stderr %q; want stdout %q", c.args, r.stdout, r.stderr, c.want)
		}
	}

	// During a rotation the note goes to stderr; stdout stays the credential.
	status(t, ns, "orders", distributedAt(1, "r-7"))
	r := kc.ok(t, "show", "orders", "--user", "billing")
	if r.stdout != b+"\n" || r.stderr != "note: rotation r-7 is active; this is its new password (the old one works until discard)\n" {
		t.Errorf("show during a rotation: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

func TestShowErrors(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	kc := in(t, ns)
	newSet(t, ns, "orders")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "orders"}, `credentialset "orders" has 2 users: choose one with --user (orders@%, billing@10.%)`},
		{[]string{"show", "orders", "--user", "root"}, `credentialset "orders" has no user "root": use one of orders@%, billing@10.%`},
		{[]string{"show", "orders", "--user", "orders@localhost"}, `credentialset "orders" has no user "orders@localhost"`},
		{[]string{"show", "orders", "--user", "orders", "--format", "json"}, `unknown format "json": use plain, mycnf or env`},
		{[]string{"show", "orders", "--format", "yaml"}, `unknown format "yaml"`},
		{[]string{"show", "nope", "--user", "orders"}, `credentialset "nope" not found in namespace "` + ns + `"`},
		{[]string{"show"}, "show needs the name of a CredentialSet: kubectl rekey show NAME"},
	} {
		if r := kc.fails(t, c.want, c.args...); r.stdout != "" {
			t.Errorf("a failed show printed on stdout: %q", r.stdout)
		}
	}

	// Not distributed yet.
	fresh := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"},
		Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{
			Instances: v1.MySQLInstances{Hosts: []string{"db:3306"}},
			Admin:     v1.MySQLAdmin{User: "app"},
			Users:     []v1.MySQLUser{{Name: "app"}},
		}, Distribution: []v1.SecretTarget{{Namespace: ns, Name: "fresh-db"}}},
	}
	if err := k8s.Create(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	kc.fails(t, "distribution Secret "+ns+"/fresh-db does not exist yet", "show", "fresh")
}

// TestNoConfigFlagsAndOverrides: --kubeconfig and -n without KUBECONFIG,
// -n over the context's namespace, and no kubeconfig at all.
func TestNoConfigFlagsAndOverrides(t *testing.T) {
	t.Parallel()
	ns, other := namespace(t), namespace(t)
	pws := newSet(t, ns, "orders")
	status(t, ns, "orders", idleAt(1))

	r := noConfig.ok(t, "--kubeconfig", cp.Kubeconfig, "-n", ns, "status", "orders")
	if rows := cells(r.stdout); len(rows) != 2 || rows[1][0] != "orders" {
		t.Errorf("status with --kubeconfig -n:\n%s", r)
	}
	// Flags may follow the subcommand too, as with kubectl.
	r = noConfig.ok(t, "show", "orders", "--user", "orders", "--namespace", ns, "--kubeconfig", cp.Kubeconfig)
	if r.stdout != pws["ORDERS_PASSWORD"]+"\n" {
		t.Errorf("show with flags after the subcommand: stdout %q", r.stdout)
	}

	// -n wins over the context's namespace.
	in(t, other).ok(t, "-n", ns, "status", "orders")
	in(t, other).fails(t, `credentialset "orders" not found in namespace "`+other+`"`, "status", "orders")

	// Without any kubeconfig the error says how to give one.
	noConfig.fails(t, "no usable kubeconfig", "status")
	noConfig.fails(t, "pass --kubeconfig, set KUBECONFIG, or pick a context with --context", "rotate", "orders")
	noConfig.fails(t, "no usable kubeconfig", "--kubeconfig", "/nonexistent/kubeconfig", "status")
	noConfig.fails(t, `context "nope"`, "--kubeconfig", cp.Kubeconfig, "--context", "nope", "status")
	if len(getSet(t, ns, "orders").Annotations) != 0 {
		t.Fatal("a failed rotate annotated the set")
	}
}
