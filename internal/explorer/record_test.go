package explorer

import (
	"bytes"
	"encoding/json"
	"os"
	"sync"
	"testing"
)

// A run's figures, one JSON line per exploration, appended to the file
// REKEY_EXPLORE_OUT names (make test and make reliability set it):
// hack/reliability prints them after make test and writes them into
// docs/reliability.md. Nothing is written without it.
type runRecord struct {
	Test        string  `json:"test"`
	Kind        string  `json:"kind"` // breadth first, random walks
	States      int     `json:"states"`
	Transitions int     `json:"transitions"`
	Depth       int     `json:"depth"`
	Complete    bool    `json:"complete"`
	Checks      int     `json:"checks"`
	Violations  int     `json:"violations"`
	Seconds     float64 `json:"seconds"`
	Seed        int64   `json:"seed,omitempty"`
}

// modelRecord is what the default run models: every transition and
// invariant by name.
type modelRecord struct {
	Model struct {
		Transitions []string `json:"transitions"`
		Invariants  []string `json:"invariants"`
	} `json:"model"`
}

var recordMu sync.Mutex

// record appends v to REKEY_EXPLORE_OUT, if set.
func record(t *testing.T, v any) {
	t.Helper()
	path := os.Getenv("REKEY_EXPLORE_OUT")
	if path == "" {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	recordMu.Lock()
	defer recordMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// recordRun records r as a run of t's.
func recordRun(t *testing.T, kind string, seed int64, r Report) {
	t.Helper()
	record(t, runRecord{Test: t.Name(), Kind: kind, States: r.States, Transitions: r.Transitions, Depth: r.Depth,
		Complete: r.Complete, Checks: r.Checks, Violations: len(r.Violations), Seconds: r.Elapsed.Seconds(), Seed: seed})
}

// recordModel records the default run's transitions and invariants.
func recordModel(t *testing.T, o Options) {
	t.Helper()
	var m modelRecord
	for _, tr := range Transitions(o) {
		m.Model.Transitions = append(m.Model.Transitions, tr.Name)
	}
	m.Model.Invariants = invariantNames()
	record(t, m)
}

// TestRecord: what record writes is what hack/reliability reads.
func TestRecord(t *testing.T) {
	path := t.TempDir() + "/explore.jsonl"
	t.Setenv("REKEY_EXPLORE_OUT", path)
	recordRun(t, "breadth first", 0, Report{States: 3, Transitions: 4, Depth: 2, Complete: true, Checks: 24, Violations: []*Violation{{}}})
	recordModel(t, Options{Instances: []string{"i0"}})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var run runRecord
	var model modelRecord
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) != 2 || json.Unmarshal(lines[0], &run) != nil || json.Unmarshal(lines[1], &model) != nil {
		t.Fatalf("recorded %q", b)
	}
	if run.Test != "TestRecord" || run.States != 3 || run.Violations != 1 || !run.Complete || len(model.Model.Transitions) == 0 || len(model.Model.Invariants) != len(Invariants()) {
		t.Fatalf("recorded %+v, %+v", run, model)
	}
}
