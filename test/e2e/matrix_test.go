package e2e

import (
	"encoding/json"
	"errors"
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
//	mk.done(t, "resumed by itself, completed")
//
// Logins are the prober's (p may be nil: not probed) between mark and
// record; time to recover runs from the fault (or from resume) to done.
// A scenario whose prober saw a refused login fails its test (rule 2); one
// whose test failed before its record is written as FAILED.
const matrixEnv = "REKEY_MATRIX_OUT"

// matrixRow is one line of $REKEY_MATRIX_OUT (read by hack/reliability).
type matrixRow struct {
	Test          string   `json:"test"`
	Scenario      string   `json:"scenario"`
	Outcome       string   `json:"outcome"`
	LoginsFailed  int64    `json:"loginsFailed"`
	LoginsTotal   int64    `json:"loginsTotal"` // 0: not probed
	TimeToRecover *float64 `json:"timeToRecover"`
}

type scenarioMark struct {
	scenario           string
	p                  *prober
	attempts, failures int64
	start, from, until time.Time
	recorded           bool
}

func matrixMark(t testing.TB, p *prober, scenario string) *scenarioMark {
	m := &scenarioMark{scenario: scenario, p: p, start: time.Now()}
	m.from = m.start
	if p != nil {
		m.attempts, m.failures = p.attempts.Load(), p.failures.Load()
	}
	t.Cleanup(func() {
		if !m.recorded && t.Failed() {
			m.write(t, "FAILED (see the test log)", nil)
		}
	})
	return m
}

// resume restarts the recovery clock: the fault was removed, or the
// operator's action that recovers from it was taken.
func (m *scenarioMark) resume() { m.from = time.Now() }

// reached stops the recovery clock; the checks after it do not count.
func (m *scenarioMark) reached() { m.until = time.Now() }

// done records an outcome reached by recovering; held one that stops in a
// refusal on purpose (no time to recover).
func (m *scenarioMark) done(t testing.TB, outcome string) {
	t.Helper()
	if m.until.IsZero() {
		m.reached()
	}
	m.doneIn(t, outcome, m.until.Sub(m.from))
}

func (m *scenarioMark) doneIn(t testing.TB, outcome string, d time.Duration) {
	t.Helper()
	s := d.Seconds()
	m.write(t, outcome, &s)
}

func (m *scenarioMark) held(t testing.TB, outcome string) {
	t.Helper()
	m.write(t, outcome, nil)
}

func (m *scenarioMark) write(t testing.TB, outcome string, ttr *float64) {
	t.Helper()
	m.recorded = true
	row := matrixRow{Test: strings.SplitN(t.Name(), "/", 2)[0], Scenario: m.scenario, Outcome: outcome, TimeToRecover: ttr}
	if m.p != nil {
		row.LoginsTotal = m.p.attempts.Load() - m.attempts
		row.LoginsFailed = m.p.failures.Load() - m.failures
		if row.LoginsFailed > 0 {
			row.Outcome = "LOCKED OUT: " + outcome
			m.p.mu.Lock()
			t.Errorf("%s: %d of %d logins refused:\n%s", m.scenario, row.LoginsFailed, row.LoginsTotal, strings.Join(m.p.firstFailures, "\n"))
			m.p.mu.Unlock()
		}
	}
	t.Logf("matrix: %s: %s (logins %d/%d failed)", row.Scenario, row.Outcome, row.LoginsFailed, row.LoginsTotal)
	path := os.Getenv(matrixEnv)
	if path == "" {
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
