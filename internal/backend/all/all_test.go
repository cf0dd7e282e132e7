package all

import (
	"flag"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"rekey.io/rekey/internal/backend/registry"
)

// optional are the parts of a registration a backend may leave out, each
// with what leaving it out means; every other part is required.
var optional = map[string]string{
	"WritesNoSecret":            "false: Build may rewrite a Secret, so the controller reads afresh",
	"StatefulSets":              "nil: no StatefulSet wakes the set",
	"Target":                    "nil: every distribution target holds all identities",
	"Flags":                     "nil: the backend reads no manager flag",
	"Describe.Resolve":          "nil: the set as it is",
	"Describe.RenderedKeys":     "nil: the plan lists the keys already",
	"Describe.MoreSecrets":      "nil: no Secret besides the source and distribution ones",
	"Describe.Show.Unqualified": "false: an unknown format's message names the backend",
	"Describe.Rank":             "0: first in the help tables",
	"Describe.Show.Pick":        "nil: a set has one identity, which Show.One names (one of the two is required)",
	"Describe.Show.One":         "\"\": Show.Pick picks one of several",
	"Describe.Repairs":          "nil: recover handles only the failures every backend shares",
	"Describe.Help.Recover":     "\"\": recover's help says nothing of the backend",
	"Describe.Help.New":         "\"\": the overview says Name and Secrets (\"MySQL passwords\")",
}

// TestEveryBackendRegistersEverything: each backend rekey ships supplies
// every part of a registration the controller, the plugin and the
// manager ask for, so none of them falls back to another backend's
// knowledge or to nothing. A part added to registry.Entry is required of
// every backend unless listed in optional.
func TestEveryBackendRegistersEverything(t *testing.T) {
	entries := registry.Entries()
	if len(entries) < 4 {
		t.Fatalf("%d backends registered, want MySQL, Ceph, RabbitMQ and PostgreSQL at least", len(entries))
	}
	for _, e := range entries {
		for _, missing := range unset(reflect.ValueOf(e), "") {
			t.Errorf("backend %q registers no %s", e.Kind, missing)
		}
		if s := e.Describe.Show; (s.Pick == nil) == (s.One == "") {
			t.Errorf("backend %q: Show needs either Pick (how show picks one of a set's identities) or One (the one it has), not both", e.Kind)
		}
		if p := e.Describe.Show.Pick; p != nil && (p.Flag == "" || p.Noun == "" || p.Choices == nil) {
			t.Errorf("backend %q: Show.Pick %+v needs a flag, a noun and its choices", e.Kind, *p)
		}
		for _, f := range e.Flags {
			if f.Name == "" || f.Usage == "" {
				t.Errorf("backend %q: flag %+v needs a name and a usage", e.Kind, f)
			}
		}
	}
	// The check itself finds what a bare registration lacks.
	if got := unset(reflect.ValueOf(registry.Entry{Kind: "x"}), ""); !containsAll(got, "Build", "LockKeys", "Identities", "Describe.Show.Credential", "Describe.Help.Rotate") {
		t.Errorf("a bare registration lacks only %v", got)
	}
	// Two backends defining one flag would panic here.
	registry.BindFlags(flag.NewFlagSet("manager", flag.PanicOnError))
}

func containsAll(s []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(s, w) {
			return false
		}
	}
	return true
}

// unset lists the fields of v (a struct) that are zero and not optional.
func unset(v reflect.Value, prefix string) []string {
	var out []string
	for i := range v.NumField() {
		name := prefix + v.Type().Field(i).Name
		f := v.Field(i)
		if _, ok := optional[name]; ok {
			continue
		}
		if f.Kind() == reflect.Struct {
			out = append(out, unset(f, name+".")...)
			continue
		}
		if f.IsZero() || f.Kind() == reflect.Slice && f.Len() == 0 {
			out = append(out, name)
		}
	}
	return out
}

// TestOnlyAllNamesBackends: outside internal/backend, no package imports a
// backend package; they reach the backends through the registry, and
// internal/backend/all is the one list of them. A new backend is its
// package and a line in all.go. (Tests may import backends: they start
// them against real servers.)
func TestOnlyAllNamesBackends(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "rekey.io/rekey/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const backend = "rekey.io/rekey/internal/backend/"
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if strings.HasPrefix(fields[0], backend) {
			continue
		}
		checked++
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, backend) && imp != backend+"registry" && imp != backend+"all" {
				t.Errorf("%s imports %s: ask the registry (internal/backend/registry) instead", fields[0], imp)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("go list named only %d packages outside internal/backend:\n%s", checked, out)
	}
}
