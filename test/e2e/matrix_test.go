package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"rekey.io/rekey/internal/testenv"
)

// The fault matrix (issue 5): every fault scenario records what happened
// to it as one JSON line in the file $REKEY_MATRIX_OUT (nothing when it is
// unset); hack/reliability turns the lines into docs/reliability.md.
//
// A scenario is a mark taken when its fault is injected and a record call
// where its outcome is known:
//
//	mk := matrixMark(t, p, "instance stopped before phase 1")
//	... mk.resume()  // optional: the fault is gone, or an operator acted
//	... mk.reached() // optional: recovered here; what follows verifies it
//	mk.done(t, "resumes by itself and completes")
//
// The text given to done (or held) is the test's own description of what
// it expects; the row's outcome is not that text but what the harness saw:
// every check that held between mark and record (phases and generations
// reached, events and conditions seen, login matrices with their counts —
// see observed), the prober's logins, and the logins of the test's consumer
// pods (podconsumer_test.go) with how many of them restarted. Logins are
// counted between mark and record; time to recover runs from the fault (or
// from resume) to reached (default: the record). A scenario in which the
// prober or a consumer pod saw a refused login fails its test (never lock out); one
// whose test failed before its record is written as FAILED.
const matrixEnv = "REKEY_MATRIX_OUT"

// Verdicts of a row.
const (
	verdictPassed    = "passed"
	verdictLockedOut = "LOCKED OUT"
	verdictFailed    = "FAILED"
)

// matrixRow is one line of $REKEY_MATRIX_OUT (read by hack/reliability).
type matrixRow struct {
	Test     string   `json:"test"`
	Scenario string   `json:"scenario"`
	Expected string   `json:"expected"` // the test's description of what it checks
	Observed []string `json:"observed"` // the checks that held, in order
	Verdict  string   `json:"verdict"`  // passed, LOCKED OUT or FAILED
	// The prober: logins with whatever the distributed Secret holds now.
	LoginsFailed int64 `json:"loginsFailed"`
	LoginsTotal  int64 `json:"loginsTotal"` // 0: not probed
	// The consumer pods: logins with what each read when it started.
	ConsumerPods         int   `json:"consumerPods"` // declared replicas; 0: no consumer
	ConsumerLoginsFailed int64 `json:"consumerLoginsFailed"`
	ConsumerLoginsTotal  int64 `json:"consumerLoginsTotal"`
	ConsumerStarts       int64 `json:"consumerStarts"` // pods (re)started, each reading the Secret
	// Refused after the pod's deletion was requested (not lockouts; see
	// podConsumers.terminatedBy): shown, so that none hides.
	ConsumerRefusedAfterSIGTERM int64             `json:"consumerRefusedAfterSigterm"`
	ConsumerRefusals            []consumerRefusal `json:"consumerRefusals,omitempty"`
	TimeToRecover               *float64          `json:"timeToRecover"`
}

type scenarioMark struct {
	scenario           string
	p                  *prober
	attempts, failures int64
	consumers          map[*podConsumers]consumerTotals // at the mark
	observedFrom       int
	saws               []string // this row's own observations (saw)
	failedBefore       bool
	start, from, until time.Time
	recorded           bool
	unreported         bool // proberMark
}

// proberMark is a matrixMark whose scenario has no consumer pods (a prober
// or the test's own clients stand for the consumers): checked and logged
// alike, but no row of docs/reliability.md, which counts only scenarios
// that consumer pods reading their Secret at start went through.
func proberMark(t testing.TB, p *prober, scenario string) *scenarioMark {
	m := matrixMark(t, p, scenario)
	m.unreported = true
	return m
}

func matrixMark(t testing.TB, p *prober, scenario string) *scenarioMark {
	m := &scenarioMark{scenario: scenario, p: p, start: time.Now(), failedBefore: t.Failed(),
		consumers: map[*podConsumers]consumerTotals{}}
	m.from = m.start
	if p != nil {
		m.attempts, m.failures = p.attempts.Load(), p.failures.Load()
	}
	for _, pc := range consumersOf(t) {
		m.consumers[pc] = pc.totals()
	}
	m.observedFrom = openObservations(t)
	t.Cleanup(func() {
		if !m.recorded && t.Failed() {
			m.write(t, "", nil)
		}
	})
	return m
}

// saw adds an observation that belongs to this row only (where several
// scenarios are open at once).
func (m *scenarioMark) saw(format string, args ...any) {
	m.saws = append(m.saws, fmt.Sprintf(format, args...))
}

// resume restarts the recovery clock: the fault was removed, or the
// operator's action that recovers from it was taken.
func (m *scenarioMark) resume() { m.from = time.Now() }

// reached stops the recovery clock; the checks after it do not count.
func (m *scenarioMark) reached() { m.until = time.Now() }

// done records a scenario that recovered; expected is the test's
// description of it. held records one that stops in a refusal on purpose
// (no time to recover).
func (m *scenarioMark) done(t testing.TB, expected string) {
	t.Helper()
	if m.until.IsZero() {
		m.reached()
	}
	m.doneIn(t, expected, m.until.Sub(m.from))
}

func (m *scenarioMark) doneIn(t testing.TB, expected string, d time.Duration) {
	t.Helper()
	s := d.Seconds()
	m.write(t, expected, &s)
}

func (m *scenarioMark) held(t testing.TB, expected string) {
	t.Helper()
	m.write(t, expected, nil)
}

// write records the row. expected is empty when the test failed before
// the scenario's record (called from the mark's cleanup).
func (m *scenarioMark) write(t testing.TB, expected string, ttr *float64) {
	t.Helper()
	m.recorded = true
	row := matrixRow{Test: topTest(t), Scenario: m.scenario, Expected: expected, Verdict: verdictPassed,
		Observed: append(closeObservations(t, m.observedFrom), m.saws...), TimeToRecover: ttr}
	switch {
	case expected == "":
		row.Verdict = verdictFailed
		row.Expected = "(the test failed before this scenario's record; see its log)"
	case t.Failed() && !m.failedBefore:
		row.Verdict = verdictFailed // a non-fatal check failed during the scenario
	}
	var locked []string
	if m.p != nil {
		row.LoginsTotal = m.p.attempts.Load() - m.attempts
		row.LoginsFailed = m.p.failures.Load() - m.failures
		if row.LoginsFailed > 0 {
			m.p.mu.Lock()
			locked = append(locked, fmt.Sprintf("prober: %d of %d logins refused:\n%s", row.LoginsFailed, row.LoginsTotal, strings.Join(m.p.firstFailures, "\n")))
			m.p.mu.Unlock()
		}
	}
	// Consumers deployed after the mark count from zero.
	for _, pc := range consumersOf(t) {
		at := m.consumers[pc]
		now := pc.totals()
		row.ConsumerPods += consumerReplicas
		row.ConsumerLoginsTotal += now.attempts - at.attempts
		row.ConsumerLoginsFailed += now.refused - at.refused
		row.ConsumerStarts += now.starts - at.starts
		row.ConsumerRefusedAfterSIGTERM += now.refusedTerminating - at.refusedTerminating
		if now.refused > at.refused {
			rs := pc.refusalsSince(m.start)
			row.ConsumerRefusals = append(row.ConsumerRefusals, rs...)
			locked = append(locked, fmt.Sprintf("consumer pods of Deployment %s: %d of %d logins refused; first:\n%s",
				pc.name, now.refused-at.refused, now.attempts-at.attempts, refusalLines(rs)))
		}
	}
	if len(locked) > 0 {
		if row.Verdict == verdictPassed {
			row.Verdict = verdictLockedOut
		}
		t.Errorf("%s: locked out:\n%s", m.scenario, strings.Join(locked, "\n"))
	}
	t.Logf("matrix: %s: %s; observed: %s (prober logins %d/%d failed; consumer logins %d/%d failed, %d pod starts)",
		row.Scenario, row.Verdict, strings.Join(row.Observed, "; "), row.LoginsFailed, row.LoginsTotal,
		row.ConsumerLoginsFailed, row.ConsumerLoginsTotal, row.ConsumerStarts)
	path := os.Getenv(matrixEnv)
	if path == "" || m.unreported {
		return
	}
	b, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	matrixMu.Lock()
	defer matrixMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("%s: %v", matrixEnv, err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Fatalf("%s: %v", matrixEnv, err)
	}
}

// Observations: the shared check helpers (eventually, waitPhase,
// waitEvent, loginMatrix, assertSuperReadOnly, ...) report each check that
// held through observed; while a matrix scenario of that top-level test is
// open, the check becomes part of its outcome. Nothing is kept otherwise.
var observations = struct {
	sync.Mutex
	open  map[string]int      // top-level test → scenarios open
	log   map[string][]string // top-level test → checks since the first opened
	names map[string]string   // instance address → name (ports change every run)
}{open: map[string]int{}, log: map[string][]string{}, names: map[string]string{}}

// observed notes a check that held. Say what was checked and its result,
// never a secret.
func observed(t testing.TB, format string, args ...any) {
	top := topTest(t)
	observations.Lock()
	defer observations.Unlock()
	if observations.open[top] > 0 {
		s := fmt.Sprintf(format, args...)
		for addr, name := range observations.names {
			s = strings.ReplaceAll(s, addr, name)
		}
		observations.log[top] = append(observations.log[top], s)
	}
}

// nameInstances makes observations name instances instead of addresses.
func nameInstances(insts ...*testenv.MySQLInstance) {
	observations.Lock()
	defer observations.Unlock()
	for _, i := range insts {
		if i != nil {
			observations.names[i.Addr()] = i.Name
		}
	}
}

func openObservations(t testing.TB) int {
	top := topTest(t)
	observations.Lock()
	defer observations.Unlock()
	observations.open[top]++
	return len(observations.log[top])
}

// closeObservations returns the checks since from, repeats folded.
func closeObservations(t testing.TB, from int) []string {
	top := topTest(t)
	observations.Lock()
	defer observations.Unlock()
	var out []string
	n := 1
	log := observations.log[top]
	for i := from; i < len(log); i++ {
		if i+1 < len(log) && log[i+1] == log[i] {
			n++
			continue
		}
		if n > 1 {
			out = append(out, fmt.Sprintf("%s (×%d)", log[i], n))
		} else {
			out = append(out, log[i])
		}
		n = 1
	}
	if observations.open[top]--; observations.open[top] <= 0 {
		delete(observations.open, top)
		delete(observations.log, top)
	}
	return out
}

var matrixMu sync.Mutex

// loginProber is startProber for scenarios that stop instances on
// purpose: only a refused password (MySQL error 1045) counts as a failed
// login; an instance that does not answer is not a login attempt.
func loginProber(t testing.TB, insts []*testenv.MySQLInstance, ns, secret string) *prober {
	refused := func(err error) bool {
		var me *mysql.MySQLError
		return errors.As(err, &me) && me.Number == 1045
	}
	return probeLoop(t, ns, secret, mocoKeys, func() []*testenv.MySQLInstance { return insts }, refused, nil)
}
