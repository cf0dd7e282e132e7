// Command reliability turns the JSON lines the e2e fault matrix writes
// (REKEY_MATRIX_OUT, one line per scenario; see matrixRow in
// test/e2e/matrix_test.go) into docs/reliability.md, with a section on the
// state-space explorer from the lines its tests write (-explore,
// REKEY_EXPLORE_OUT); -explore-summary prints those alone (make test).
//
//	go run ./hack/reliability -in matrix.jsonl -out docs/reliability.md -commit <hash> -command '<the exact command>'
//
// make reliability runs the matrix on a clean checkout of one commit and
// passes that commit: the document describes exactly it, not a working
// tree with edits in progress. It exits 1 when a scenario failed, locked a
// consumer out or declared no consumer (after writing the document, so the
// failure is visible there too).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

type row struct {
	Test                 string    `json:"test"`
	Scenario             string    `json:"scenario"`
	Expected             string    `json:"expected"`
	Observed             []string  `json:"observed"`
	Verdict              string    `json:"verdict"`
	LoginsFailed         int64     `json:"loginsFailed"`
	LoginsTotal          int64     `json:"loginsTotal"`
	ConsumerPods         int       `json:"consumerPods"`
	ConsumerLoginsFailed int64     `json:"consumerLoginsFailed"`
	ConsumerLoginsTotal  int64     `json:"consumerLoginsTotal"`
	ConsumerStarts       int64     `json:"consumerStarts"`
	ConsumerAfterSIGTERM int64     `json:"consumerRefusedAfterSigterm"`
	ConsumerRefusals     []refusal `json:"consumerRefusals"`
	TimeToRecover        *float64  `json:"timeToRecover"`
}

// refusal is a consumer pod's refused login (test/e2e/podconsumer_test.go).
type refusal struct {
	At         time.Time `json:"at"`
	Deployment string    `json:"deployment"`
	Pod        string    `json:"pod"`
	User       string    `json:"user"`
	Instance   string    `json:"instance"`
	Generation string    `json:"generation"`
	SecretHash string    `json:"secretHash"`
	Error      string    `json:"error"`
}

// problems says why a row fails the matrix; none when it passed. A row
// whose verdict is not "passed", a refused login of the prober or of a
// consumer pod, and a scenario without consumer pods (every
// scenario declares them) all fail it.
func (r row) problems() []string {
	var p []string
	if r.Verdict != "passed" {
		p = append(p, "verdict "+r.Verdict)
	}
	if r.LoginsFailed > 0 {
		p = append(p, fmt.Sprintf("prober: %d logins refused", r.LoginsFailed))
	}
	if r.ConsumerLoginsFailed > 0 {
		p = append(p, fmt.Sprintf("consumer pods: %d logins refused", r.ConsumerLoginsFailed))
	}
	if r.ConsumerPods == 0 {
		p = append(p, "no consumer pods declared")
	}
	if len(r.Observed) == 0 && r.Verdict == "passed" {
		p = append(p, "no check observed")
	}
	return p
}

func main() {
	in := flag.String("in", "", "JSON lines written by the e2e tests (REKEY_MATRIX_OUT)")
	out := flag.String("out", "docs/reliability.md", "document to write")
	command := flag.String("command", "", "the exact command that produced -in, quoted in the document")
	commit := flag.String("commit", "", "the commit tested: a full hash, checked out clean (make reliability does)")
	subject := flag.String("subject", "", "that commit's subject line")
	note := flag.String("note", "", "a remark on the run (e.g. what else loaded the machine)")
	explore := flag.String("explore", "", "JSON lines written by the explorer's tests (REKEY_EXPLORE_OUT), for the document's section on it")
	exploreCommand := flag.String("explore-command", "", "the exact command that produced -explore, quoted in the document")
	summary := flag.String("explore-summary", "", "print what the explorer's tests (REKEY_EXPLORE_OUT) covered, and exit (make test)")
	flag.Parse()
	if *summary != "" {
		e, err := readExplore(*summary)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Print(e.summary())
		return
	}
	if *in == "" || !isCommit(*commit) {
		fmt.Fprintln(os.Stderr, "usage: reliability -in FILE -commit <40-hex commit tested> [-subject S] [-out docs/reliability.md] [-command CMD]")
		os.Exit(2)
	}
	rows, err := read(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(rows) == 0 {
		fmt.Fprintf(os.Stderr, "%s holds no scenario: did the tests run with REKEY_MATRIX_OUT set?\n", *in)
		os.Exit(1)
	}
	var ex *explored
	if *explore != "" {
		e, err := readExplore(*explore)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		ex = &e
	}
	doc := render(rows, *command, *commit, *subject, *note, time.Now().UTC())
	if ex != nil {
		b := bytes.NewBuffer(doc)
		renderExplore(b, *ex, *exploreCommand)
		doc = b.Bytes()
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bad := 0
	for _, r := range rows {
		if p := r.problems(); len(p) > 0 {
			bad++
			fmt.Fprintf(os.Stderr, "%s / %s: %s\n", r.Test, r.Scenario, strings.Join(p, "; "))
		}
	}
	fmt.Printf("%s: %d scenarios, %d failed\n", *out, len(rows), bad)
	if ex != nil {
		_, _, _, violations, _ := ex.totals()
		fmt.Printf("%s: the explorer's %d explorations, %d violations\n", *out, len(ex.runs), violations)
		if violations > 0 {
			bad++
		}
	}
	if bad > 0 {
		os.Exit(1)
	}
}

func isCommit(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

func read(path string) ([]row, error) {
	var rows []row
	err := eachLine(path, func(dec *json.Decoder) error {
		var r row
		if err := dec.Decode(&r); err != nil {
			return err
		}
		if r.Verdict == "" {
			return fmt.Errorf("a row without a verdict")
		}
		rows = append(rows, r)
		return nil
	})
	return rows, err
}

// eachLine calls fn with a decoder of each non-empty line of the JSON
// lines file path. Unknown fields are refused: a line from another
// harness version must not render half empty.
func eachLine(path string, fn func(*json.Decoder) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := fn(dec); err != nil {
			return fmt.Errorf("%s:%d: %v", path, n, err)
		}
	}
	return sc.Err()
}

func render(rows []row, command, commit, subject, note string, now time.Time) []byte {
	var b bytes.Buffer
	var tests []string
	byTest := map[string][]row{}
	var logins, failedLogins, cLogins, cFailed, cStarts int64
	bad := 0
	var locked []row
	for _, r := range rows {
		if _, ok := byTest[r.Test]; !ok {
			tests = append(tests, r.Test)
		}
		byTest[r.Test] = append(byTest[r.Test], r)
		logins += r.LoginsTotal
		failedLogins += r.LoginsFailed
		cLogins += r.ConsumerLoginsTotal
		cFailed += r.ConsumerLoginsFailed
		cStarts += r.ConsumerStarts
		if len(r.problems()) > 0 {
			bad++
		}
		if r.ConsumerLoginsFailed > 0 || r.LoginsFailed > 0 {
			locked = append(locked, r)
		}
	}
	fmt.Fprintf(&b, "# Reliability: the MySQL and PostgreSQL fault matrix, and the state-space explorer\n\n")
	fmt.Fprintf(&b, "Generated by `hack/reliability` from one run of the fault matrix on a clean checkout of\n")
	fmt.Fprintf(&b, "the commit named below; do not edit by hand, run `make reliability` again. Every scenario runs on real\n")
	fmt.Fprintf(&b, "servers: a kube-apiserver with etcd, kube-controller-manager, kube-scheduler and kwok (the Deployment\n")
	fmt.Fprintf(&b, "controller really rolls consumers out), and a mysqld primary with two replicas (TestPostgres*: a\n")
	fmt.Fprintf(&b, "PostgreSQL primary with a streaming replica). Two kinds of clients log in all along:\n\n")
	fmt.Fprintf(&b, "- **consumer pods**: a Deployment of 2 pods declared in the set's `spec.consumers`. Each pod reads the\n")
	fmt.Fprintf(&b, "  distributed Secret once, when it starts (as `envFrom` does), and keeps logging in to every instance with\n")
	fmt.Fprintf(&b, "  what it read until the rollout rekey triggers replaces it;\n")
	fmt.Fprintf(&b, "- **the prober**: logs in as every user on every instance with whatever the distributed Secret holds at\n")
	fmt.Fprintf(&b, "  that moment (it cannot see a consumer left holding an old password; the pods can).\n\n")
	fmt.Fprintf(&b, "- Commit: %s", commit)
	if subject != "" {
		fmt.Fprintf(&b, " (%s)", cell(subject))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "- Date: %s\n", now.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Machine: %d CPUs%s, %s/%s, %s\n", runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	if command != "" {
		fmt.Fprintf(&b, "- Command: `%s`\n", command)
	}
	if note != "" {
		fmt.Fprintf(&b, "- Note: %s\n", note)
	}
	fmt.Fprintf(&b, "- Result: %d scenarios, %d failed; consumer pods: %d logins, %d refused, %d pod starts; prober: %d logins, %d refused\n\n",
		len(rows), bad, cLogins, cFailed, cStarts, logins, failedLogins)
	for _, t := range tests {
		fmt.Fprintf(&b, "## %s\n\n", t)
		fmt.Fprintf(&b, "| # | Scenario | Verdict | Consumer logins refused / total (pod starts) | Prober logins refused / total | Time to recover |\n")
		fmt.Fprintf(&b, "|---|---|---|---|---|---|\n")
		for i, r := range byTest[t] {
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", i+1, cell(r.Scenario), verdictCell(r),
				consumerCell(r), loginsCell(r), recoverCell(r.TimeToRecover))
		}
		b.WriteString("\n")
		for i, r := range byTest[t] {
			obs := "nothing (no check held before the record)"
			if len(r.Observed) > 0 {
				obs = strings.Join(r.Observed, "; ")
			}
			fmt.Fprintf(&b, "%d. Observed: %s.<br>Expected: %s\n", i+1, line(obs), line(r.Expected))
		}
		b.WriteString("\n")
	}
	if len(locked) > 0 {
		b.WriteString("## Lockouts\n\nEvery refused login of a consumer pod kept by the run (the first ones per Deployment), by scenario:\n\n")
		for _, r := range locked {
			fmt.Fprintf(&b, "- **%s / %s**: consumer pods %d of %d logins refused, prober %d of %d\n",
				r.Test, cell(r.Scenario), r.ConsumerLoginsFailed, r.ConsumerLoginsTotal, r.LoginsFailed, r.LoginsTotal)
			for _, f := range r.ConsumerRefusals {
				fmt.Fprintf(&b, "  - %s pod %s (%s) as %s on %s, holding generation %s (secret-hash %s): %s\n",
					f.At.UTC().Format("15:04:05.000"), f.Pod, f.Deployment, f.User, f.Instance, f.Generation, f.SecretHash, cell(f.Error))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(`## Reading the table

- **Verdict**: "passed" — every check of the scenario held and nobody was refused; "LOCKED OUT" — a consumer pod
  or the prober was refused a login (someone was locked out), whatever else held; "FAILED" — a check failed (see the test log).
- **Observed** (the numbered list under each table): what the harness saw, not what the test's author
  wrote: each check that held between the fault and the scenario's record — the phase and generation waited for, the events and conditions seen, the
  login matrices (how many user × instance logins were accepted and refused, as required), super_read_only,
  "stored before applied" at a crash point — in the order they held; "(×n)": the same check n times in a row.
- **Consumer logins**: logins the consumer pods made while the scenario ran, how many the server refused, and how
  many pods started in that time (each start reads the Secret once). A refusal is the server's answer (MySQL: access
  denied, account locked, password expired; PostgreSQL: SQLSTATE 28P01 or 28000, a wrong password or a role that
  does not exist or may not log in); an instance stopped on purpose that does not answer is not one.
  A pod whose deletion was requested (SIGTERM; kwok deletes it at once) stops logging in; a login of it
  refused after that moment — the informer can tell the test late — is shown as "refused after SIGTERM"
  and is not a lockout. The API server, not the informer, says when the deletion was requested.
- **Prober logins**: the same for the prober. Where a test stops an instance on purpose, its prober counts
  only refused passwords. "not probed": no prober runs at that point of the test (provisioning, or a Secret a
  person broke by hand on purpose).
- **Time to recover**: from the fault (the kill, the stop, the conflicting write) — or, where the fault
  needs a person's action, from that action — until the set was back where the checks say. For an API
  conflict it is the time from the refused write until the manager made it again (0: the server accepted
  the write, nothing to recover). "—": the scenario stops on purpose in a refusal that names the next step.
- **Expected** (under Observed): the test's own description of the scenario, kept for reading; it decides
  nothing.
`)
	return b.Bytes()
}

// line keeps a text on one Markdown line.
func line(s string) string { return strings.ReplaceAll(s, "\n", " ") }

func verdictCell(r row) string {
	if p := r.problems(); len(p) > 0 && r.Verdict == "passed" {
		return "FAILED: " + strings.Join(p, ", ")
	}
	return r.Verdict
}

func consumerCell(r row) string {
	if r.ConsumerPods == 0 {
		return "no consumers"
	}
	s := fmt.Sprintf("%d / %d (%d)", r.ConsumerLoginsFailed, r.ConsumerLoginsTotal, r.ConsumerStarts)
	if r.ConsumerAfterSIGTERM > 0 {
		s += fmt.Sprintf(" + %d refused after SIGTERM", r.ConsumerAfterSIGTERM)
	}
	return s
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func loginsCell(r row) string {
	if r.LoginsTotal == 0 && r.LoginsFailed == 0 {
		return "not probed"
	}
	return fmt.Sprintf("%d / %d", r.LoginsFailed, r.LoginsTotal)
}

func recoverCell(s *float64) string {
	switch {
	case s == nil:
		return "—"
	case *s < 10:
		return fmt.Sprintf("%.2f s", *s)
	default:
		return fmt.Sprintf("%.1f s", *s)
	}
}

// cpuModel is the CPU's model name on Linux, empty elsewhere.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return " (" + strings.TrimSpace(v) + ")"
		}
	}
	return ""
}
