package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	p := &prober{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			s := &corev1.Secret{}
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: secret}, s); err != nil {
				continue
			}
			var wg sync.WaitGroup
			for k, u := range mocoKeys {
				pw := string(s.Data[k])
				for _, i := range insts {
					wg.Add(1)
					go func() {
						defer wg.Done()
						err := i.CanLogin(u, pw)
						var me *mysql.MySQLError
						if err != nil && !(errors.As(err, &me) && me.Number == 1045) {
							return // unreachable, not refused
						}
						p.attempts.Add(1)
						if err != nil {
							p.failures.Add(1)
							p.mu.Lock()
							if len(p.firstFailures) < 10 {
								p.firstFailures = append(p.firstFailures, fmt.Sprintf("%s %s on %s: %v", time.Now().Format("15:04:05.000"), u, i.Name, err))
							}
							p.mu.Unlock()
						}
					}()
				}
			}
			wg.Wait()
		}
	}()
	t.Cleanup(p.halt)
	return p
}
