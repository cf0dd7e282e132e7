package plugin

import (
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// answerCheck plays the operator: once the plugin's check request is on
// the set, it answers it in status.check with findings.
func answerCheck(t *testing.T, ns, name string, passed bool, fs ...v1.CheckFinding) {
	t.Helper()
	var id string
	waitFor(t, "check requested", func() bool {
		id = get(t, ns, name).Annotations[engine.CheckAnnotation]
		return id != ""
	})
	setStatus(t, ns, name, func(st *v1.CredentialSetStatus) {
		st.Check = &v1.CheckResult{ID: id, CheckedAt: metav1.Now(), Passed: passed, Findings: fs}
	})
}

func TestCheckPrintsFindingsAndFails(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(1))
	// An earlier answer with another ID is not this check's.
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		st.Check = &v1.CheckResult{ID: "earlier", CheckedAt: metav1.Now(), Passed: true}
	})
	annotate := func() {
		cs := get(t, ns, "orders")
		cs.Annotations = map[string]string{engine.RotateAnnotation: "r-waiting"}
		if err := k8s.Update(t.Context(), cs); err != nil {
			t.Fatal(err)
		}
	}
	annotate()
	done := make(chan struct{})
	var out string
	var err error
	go func() {
		defer close(done)
		out, _, err = kubectl(t, ns, "check", "orders", "--timeout", "30s")
	}()
	answerCheck(t, ns, "orders", false,
		v1.CheckFinding{Target: "db-0.example.internal:3306", Check: "privileges", Message: "the admin user ops-admin lacks CREATE USER: rekey creates users", Fix: "GRANT CREATE USER ON *.* TO 'ops-admin'@'%'"},
		v1.CheckFinding{Target: "Deployment " + ns + "/orders-api", Check: "consumer", Message: "does not exist", Fix: "create Deployment orders-api"},
		v1.CheckFinding{Target: "db-1.example.internal:3307", Check: "reachable", OK: true, Message: "MySQL answers at db-1.example.internal:3307"})
	<-done
	if err == nil || !strings.Contains(err.Error(), "2 checks failed") || !strings.Contains(err.Error(), "kubectl rekey check orders -n "+ns) {
		t.Fatalf("error %v, want 2 checks failed naming the command to run again", err)
	}
	rows := lines(out)
	if !strings.HasPrefix(rows[0], "check ") || !strings.Contains(rows[0], "requested for credentialset "+ns+"/orders") {
		t.Errorf("first line %q", rows[0])
	}
	for _, want := range [][]string{
		{"TARGET", "CHECK", "RESULT", "FIX"},
		{"db-0.example.internal:3306", "privileges", "FAILED: the admin user ops-admin lacks CREATE USER", "GRANT CREATE USER ON *.* TO 'ops-admin'@'%'"},
		{"Deployment " + ns + "/orders-api", "consumer", "FAILED: does not exist", "create Deployment orders-api"},
		{"db-1.example.internal:3307", "reachable", "ok: MySQL answers", "-"},
	} {
		found := false
		for _, r := range rows {
			if strings.HasPrefix(r, want[0]) && strings.Contains(r, want[1]) && strings.Contains(r, want[2]) && strings.HasSuffix(strings.TrimRight(r, " "), want[3]) {
				found = true
			}
		}
		if !found {
			t.Errorf("no row %q in\n%s", want, out)
		}
	}
	hasLine(t, out, "rotation r-waiting waits for these checks: it starts once they pass")
}

func TestCheckPassesAndDryRunShowsTheLast(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	setStatus(t, ns, "orders", idle(1))
	out, _, err := kubectl(t, ns, "rotate", "orders", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	hasLine(t, out, "Checks: none has run. A rotation runs them before it starts and is refused if one fails; see them first with kubectl rekey check orders -n "+ns)
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, _, err = kubectl(t, ns, "check", "orders")
	}()
	answerCheck(t, ns, "orders", true, v1.CheckFinding{Target: "db-0.example.internal:3306", Check: "tls", OK: true, Message: "TLS, the certificate verified"})
	<-done
	if err != nil {
		t.Fatalf("check failed: %v\n%s", err, out)
	}
	hasLine(t, out, "every check passed")
	// The dry run shows the last answer with its age, and asks nothing.
	before := get(t, ns, "orders").ResourceVersion
	later := time.Now().Add(90 * time.Second)
	var o strings.Builder
	root := NewRootCommand(Options{Out: &o, Now: func() time.Time { return later }})
	root.SetArgs([]string{"--kubeconfig", cp.Kubeconfig, "-n", ns, "rotate", "orders", "--dry-run"})
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(o.String(), "Checks: every check passed 1m3") {
		t.Errorf("dry run does not show the last check's age:\n%s", o.String())
	}
	if get(t, ns, "orders").ResourceVersion != before {
		t.Error("the dry run changed the set")
	}
	setStatus(t, ns, "orders", func(st *v1.CredentialSetStatus) {
		st.Check = &v1.CheckResult{ID: "x", CheckedAt: metav1.Now(), Findings: []v1.CheckFinding{
			{Target: "db-0.example.internal:3306", Check: "tls", Message: "not trusted", Fix: "put the CA in Secret ca key ca.crt"},
			{Target: "db-1.example.internal:3307", Check: "tls", OK: true}}}
	})
	out, _, err = kubectl(t, ns, "rotate", "orders", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	// The age is the seconds since the status write above: any number.
	if !regexp.MustCompile(`Checks: 1 check failed \d+s ago, and a rotation would be refused until they pass`).MatchString(out) || !strings.Contains(out, "put the CA in Secret ca key ca.crt") || strings.Contains(out, "db-1.example.internal:3307  tls") {
		t.Errorf("dry run does not list the failed check alone:\n%s", out)
	}
}

func TestCheckTimesOut(t *testing.T) {
	ns := namespace(t)
	create(t, hostsSet(ns, "orders"))
	mustFail(t, ns, "timed out after 1s waiting for the operator to answer check", "check", "orders", "--timeout", "1s")
}
