package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "explore.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The explorer's lines become the summary make test prints and the
// document's section, with every figure and every transition.
func TestExploreSection(t *testing.T) {
	p := writeLines(t,
		`{"model":{"transitions":["reconcile","user: rotate r1"],"invariants":["no lockout","no wedge"]}}`,
		`{"test":"TestExplore","kind":"breadth first","states":9512,"transitions":22892,"depth":3,"complete":false,"checks":76096,"violations":0,"seconds":45.1}`,
		`{"test":"TestExplore","kind":"random walks","states":574,"transitions":677,"depth":40,"complete":true,"checks":4592,"violations":0,"seconds":6.4,"seed":1}`,
		`{"test":"TestPathSwitchover","kind":"breadth first","states":1198,"transitions":4483,"depth":7,"complete":true,"checks":9584,"violations":1,"seconds":99}`)
	e, err := readExplore(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := e.summary()
	for _, want := range []string{"3 explorations, 11284 states, 28052 transitions, 90272 invariant checks, 1 violations",
		"2 transitions modelled, 2 invariants in every state: no lockout, no wedge", "TestPathSwitchover (breadth first): 1198 states"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	var b bytes.Buffer
	renderExplore(&b, e, "go test ./internal/explorer/")
	doc := b.String()
	for _, want := range []string{"## The state-space explorer", "- Command: `go test ./internal/explorer/`",
		"| TestExplore | breadth first | 9512 | 22892 | 3 (in part: the time budget ended) | 76096 | 0 | 45.1 |",
		"| TestExplore | random walks | 574 | 677 | 40 (seed 1) |", "| TestPathSwitchover | breadth first | 1198 | 4483 | 7 (complete) | 9584 | 1 |",
		"- user: rotate r1\n", "(2): no lockout; no wedge."} {
		if !strings.Contains(doc, want) {
			t.Errorf("section lacks %q:\n%s", want, doc)
		}
	}
}

// A file without the model, or with a line of another shape, is refused.
func TestExploreRefusesIncomplete(t *testing.T) {
	for name, lines := range map[string][]string{
		"no model":     {`{"test":"TestExplore","kind":"breadth first","states":1}`},
		"no runs":      {`{"model":{"transitions":["reconcile"],"invariants":["no lockout"]}}`},
		"unknown key":  {`{"model":{"transitions":[],"invariants":[]}}`, `{"test":"T","kind":"breadth first","statez":1}`},
		"neither kind": {`{"model":{"transitions":[],"invariants":[]}}`, `{"kind":"breadth first"}`},
	} {
		if _, err := readExplore(writeLines(t, lines...)); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
}
