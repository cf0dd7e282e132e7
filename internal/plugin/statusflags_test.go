package plugin

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestStatusPrinterFlags: -l, -A, --no-headers, -o custom-columns and -w
// behave as kubectl get's, on the real API server.
func TestStatusPrinterFlags(t *testing.T) {
	ns1, ns2 := namespace(t), namespace(t)
	for _, s := range []struct{ ns, name, team string }{{ns1, "pay-db", "pay"}, {ns1, "ops-db", "ops"}, {ns2, "pay-cache", "pay"}} {
		cs := hostsSet(s.ns, s.name)
		cs.Labels = map[string]string{"team": s.team}
		create(t, cs)
		setStatus(t, s.ns, s.name, idle(2))
	}
	run := func(ns string, args ...string) string {
		t.Helper()
		out, errOut, err := kubectl(t, ns, args...)
		if err != nil {
			t.Fatalf("status %v: %v\n%s", args, err, errOut)
		}
		return out
	}
	names := func(out string, col int) []string {
		var n []string
		for _, r := range rows(out) {
			n = append(n, r[col])
		}
		return n
	}
	if got := names(run(ns1, "status", "-l", "team=pay"), 0); strings.Join(got, ",") != "NAME,pay-db" {
		t.Errorf("-l team=pay: %q", got)
	}
	if got := names(run(ns1, "status", "--no-headers"), 0); strings.Join(got, ",") != "ops-db,pay-db" {
		t.Errorf("--no-headers: %q", got)
	}
	out := run(ns1, "status", "-A", "-l", "team=pay")
	var mine []string
	for _, r := range rows(out)[1:] {
		if r[0] == ns1 || r[0] == ns2 {
			mine = append(mine, r[0]+"/"+r[1])
		}
	}
	if rows(out)[0][0] != "NAMESPACE" || strings.Join(mine, ",") != ns1+"/pay-db,"+ns2+"/pay-cache" && strings.Join(mine, ",") != ns2+"/pay-cache,"+ns1+"/pay-db" {
		t.Errorf("-A -l team=pay:\n%s", out)
	}
	out = run(ns1, "status", "--no-headers", "-o", "custom-columns=NAME:.metadata.name,TEAM:.metadata.labels.team,GEN:.status.keyGeneration,WAITS:.status.waiting.for")
	if got := rows(out); len(got) != 2 || strings.Join(got[0], ",") != "ops-db,ops,2,<none>" || strings.Join(got[1], ",") != "pay-db,pay,2,<none>" {
		t.Errorf("custom-columns:\n%s", out)
	}
	if out := run(ns1, "status", "-o", "name", "-l", "team=ops"); out != "credentialset.rekey.io/ops-db\n" {
		t.Errorf("-o name -l team=ops: %q", out)
	}
	_, errOut, err := kubectl(t, ns1, "status", "-l", "team=none")
	if err != nil || !strings.Contains(errOut, "no credentialsets in namespace \""+ns1+"\" matching team=none") {
		t.Errorf("nothing selected: %v, %q", err, errOut)
	}
	mustFail(t, ns1, "custom-columns: \"NAME\" is not HEADER:PATH", "status", "-o", "custom-columns=NAME")

	// -w: the listing, then a line per change, until interrupted.
	w := kubectlLive(t, ns1, "status", "-w", "-l", "team=pay")
	w.printed(t, `(?m)^NAME +PHASE .*\npay-db +Idle +- +2 `)
	setStatus(t, ns1, "pay-db", distributed("r-9"))
	setStatus(t, ns1, "ops-db", distributed("r-8")) // not selected: never printed
	w.printed(t, `(?m)^pay-db +Distributed +- +2 +r-9 `)
	w.stop()
	if err := w.end(t); err != nil {
		t.Fatalf("status -w: %v", err)
	}
	if out := w.out.String(); strings.Count(out, "NAME ") != 1 || strings.Contains(out, "ops-db") {
		t.Errorf("status -w printed the headers again, or a set -l does not select:\n%s", out)
	}
	// -w with -o name: each change as kubectl get -w -o name prints it.
	w = kubectlLive(t, ns1, "status", "ops-db", "-w", "-o", "name")
	w.printed(t, `^credentialset.rekey.io/ops-db\n$`)
	setStatus(t, ns1, "ops-db", func(st *v1.CredentialSetStatus) { st.ConsumersUpdated = "1/1" })
	w.printed(t, `^(credentialset.rekey.io/ops-db\n){2}$`)
	w.stop()
	if err := w.end(t); err != nil {
		t.Fatalf("status -w -o name: %v", err)
	}
}
