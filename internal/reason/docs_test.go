package reason

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// eventReasons parses this package's source and returns every constant of
// type Reason except those of the block of condition-only reasons.
func eventReasons(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "reason.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		if g.Doc != nil && strings.Contains(g.Doc.Text(), "not also Event reasons") {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
				continue
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s: not a string literal", fset.Position(v.Pos()))
				}
				s, _ := strconv.Unquote(lit.Value)
				out = append(out, s)
			}
		}
	}
	if len(out) < 40 {
		t.Fatalf("found only %d Event reasons in reason.go: %v", len(out), out)
	}
	return out
}

// TestEveryReasonDocumented: docs/operations.md has a row in
// its Events table for every Event reason rekey can emit, with its type,
// whether it sets Degraded, its meaning and the next step.
func TestEveryReasonDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if i := strings.Index(name, "`"); i >= 0 {
			name = name[:i] // "`X` (RabbitMQ ...)"
		}
		if _, seen := rows[name]; !seen {
			rows[name] = cells
		}
	}
	for _, r := range eventReasons(t) {
		cells, ok := rows[r]
		if !ok {
			t.Errorf("docs/operations.md: no Events table row for %s", r)
			continue
		}
		if len(cells) != 5 {
			t.Errorf("%s: want | reason | type | sets Degraded | meaning | next step |, got %d cells", r, len(cells))
			continue
		}
		typ, degraded, meaning, next := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2]), strings.TrimSpace(cells[3]), strings.TrimSpace(cells[4])
		if typ != "Normal" && typ != "Warning" {
			t.Errorf("%s: type %q", r, typ)
		}
		if !strings.HasPrefix(degraded, "yes") && !strings.HasPrefix(degraded, "no") {
			t.Errorf("%s: sets Degraded must say yes or no: %q", r, degraded)
		}
		if typ == "Normal" && degraded != "no" {
			t.Errorf("%s: a Normal Event never sets Degraded: %q", r, degraded)
		}
		if meaning == "" || next == "" {
			t.Errorf("%s: meaning and next step must be given (next step may be \"none\")", r)
		}
	}
}
