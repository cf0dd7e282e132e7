package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// exploreRun is one exploration of the state-space explorer, as its tests
// write it to REKEY_EXPLORE_OUT (internal/explorer record_test.go).
type exploreRun struct {
	Test        string  `json:"test"`
	Kind        string  `json:"kind"`
	States      int     `json:"states"`
	Transitions int     `json:"transitions"`
	Depth       int     `json:"depth"`
	Complete    bool    `json:"complete"`
	Checks      int     `json:"checks"`
	Violations  int     `json:"violations"`
	Seconds     float64 `json:"seconds"`
	Seed        int64   `json:"seed"`
}

// exploreModel is what the explorer's default run models.
type exploreModel struct {
	Transitions []string `json:"transitions"`
	Invariants  []string `json:"invariants"`
}

// explored is a run of the explorer package: its explorations and model.
type explored struct {
	runs  []exploreRun
	model *exploreModel
}

func readExplore(path string) (explored, error) {
	var e explored
	err := eachLine(path, func(dec *json.Decoder) error {
		var v struct {
			exploreRun
			Model *exploreModel `json:"model"`
		}
		if err := dec.Decode(&v); err != nil {
			return err
		}
		switch {
		case v.Model != nil:
			e.model = v.Model
		case v.Test == "":
			return fmt.Errorf("neither a run nor the model")
		default:
			e.runs = append(e.runs, v.exploreRun)
		}
		return nil
	})
	if err != nil {
		return e, err
	}
	if len(e.runs) == 0 || e.model == nil {
		return e, fmt.Errorf("%s: %d explorations, model recorded: %v; did the explorer's tests run with REKEY_EXPLORE_OUT set?", path, len(e.runs), e.model != nil)
	}
	return e, nil
}

// totals sums e's explorations.
func (e explored) totals() (states, transitions, checks, violations int, seconds float64) {
	for _, r := range e.runs {
		states += r.States
		transitions += r.Transitions
		checks += r.Checks
		violations += r.Violations
		seconds += r.Seconds
	}
	return
}

// summary is what make test prints of the explorer's run.
func (e explored) summary() string {
	states, transitions, checks, violations, seconds := e.totals()
	var b strings.Builder
	fmt.Fprintf(&b, "state-space explorer: %d explorations, %d states, %d transitions, %d invariant checks, %d violations, %.0f s; %d transitions modelled, %d invariants in every state: %s\n",
		len(e.runs), states, transitions, checks, violations, seconds, len(e.model.Transitions), len(e.model.Invariants), strings.Join(e.model.Invariants, ", "))
	for _, r := range e.runs {
		fmt.Fprintf(&b, "  %s (%s): %s\n", r.Test, r.Kind, r.figures())
	}
	return b.String()
}

func (r exploreRun) figures() string {
	complete := "complete"
	if !r.Complete {
		complete = "in part"
	}
	if r.Kind == "random walks" {
		complete = fmt.Sprintf("seed %d", r.Seed)
	}
	return fmt.Sprintf("%d states, %d transitions, depth %d (%s), %d invariant checks, %d violations, %.1f s",
		r.States, r.Transitions, r.Depth, complete, r.Checks, r.Violations, r.Seconds)
}

// renderExplore is docs/reliability.md's section on the explorer, run by
// command on the same commit as the matrix.
func renderExplore(b *bytes.Buffer, e explored, command string) {
	states, transitions, checks, violations, seconds := e.totals()
	b.WriteString("## The state-space explorer\n\n")
	b.WriteString("The explorer (`internal/explorer`, docs/explorer.md) drives the real engine and controller against a model\n")
	b.WriteString("world (MySQL instances, a consumer pod that keeps what it read at start, the Kubernetes objects) and checks\n")
	b.WriteString("every invariant below in every state it reaches: breadth first to a depth, and on seeded random walks. Each\n")
	b.WriteString("behaviour of the model is proven on real servers by the tests docs/explorer.md names.\n\n")
	if command != "" {
		fmt.Fprintf(b, "- Command: `%s`\n", command)
	}
	fmt.Fprintf(b, "- Result: %d explorations, %d states, %d transitions, %d invariant checks, %d violations, %.0f s\n\n",
		len(e.runs), states, transitions, checks, violations, seconds)
	b.WriteString("| Test | Search | States | Transitions | Depth | Invariant checks | Violations | Seconds |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range e.runs {
		depth := fmt.Sprintf("%d", r.Depth)
		switch {
		case r.Kind == "random walks":
			depth += fmt.Sprintf(" (seed %d)", r.Seed)
		case r.Complete:
			depth += " (complete)"
		default:
			depth += " (in part: the time budget ended)"
		}
		fmt.Fprintf(b, "| %s | %s | %d | %d | %s | %d | %d | %.1f |\n", cell(r.Test), r.Kind, r.States, r.Transitions, depth, r.Checks, r.Violations, r.Seconds)
	}
	fmt.Fprintf(b, "\nInvariants checked in every state (%d): %s.\n\n", len(e.model.Invariants), strings.Join(e.model.Invariants, "; "))
	fmt.Fprintf(b, "Transitions of the default run (`TestExplore`, %d; each path test keeps those its path needs):\n\n", len(e.model.Transitions))
	for _, t := range e.model.Transitions {
		fmt.Fprintf(b, "- %s\n", cell(t))
	}
	b.WriteString("\n")
}
