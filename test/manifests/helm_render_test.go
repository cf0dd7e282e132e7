package manifests

// The chart rendered in-process, as `helm template` would, with Go's
// text/template and the few Helm functions its templates use: the checks
// of helm_test.go run without the helm binary.

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"sigs.k8s.io/yaml"
)

const chartDir = "charts/rekey"

// helmFuncs are the few Sprig/Helm functions the chart's templates use,
// implemented as Helm documents them. A template using another one fails
// to parse here: add it below, or keep the templates simple.
func helmFuncs(tpl **template.Template) template.FuncMap {
	empty := func(v any) bool {
		if v == nil {
			return true
		}
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Map, reflect.Slice, reflect.Array, reflect.String:
			return rv.Len() == 0
		}
		return rv.IsZero()
	}
	indent := func(n int, s string) string {
		pad := strings.Repeat(" ", n)
		return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
	}
	return template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b strings.Builder
			err := (*tpl).ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"toYaml": func(v any) string {
			out, err := yaml.Marshal(v)
			if err != nil {
				return ""
			}
			return strings.TrimSuffix(string(out), "\n")
		},
		"indent":  indent,
		"nindent": func(n int, s string) string { return "\n" + indent(n, s) },
		"quote": func(v ...any) string {
			var out []string
			for _, s := range v {
				if s != nil {
					out = append(out, strconv.Quote(fmt.Sprint(s)))
				}
			}
			return strings.Join(out, " ")
		},
		"default": func(d any, given ...any) any {
			if len(given) == 0 || empty(given[0]) {
				return d
			}
			return given[0]
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"join": func(sep string, list []any) string {
			var out []string
			for _, v := range list {
				out = append(out, fmt.Sprint(v))
			}
			return strings.Join(out, sep)
		},
		"list": func(items ...any) []any { return items },
		"concat": func(lists ...[]any) []any {
			var out []any
			for _, l := range lists {
				out = append(out, l...)
			}
			return out
		},
		"uniq": func(list []any) []any {
			var out []any
			for _, v := range list {
				if !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
			return out
		},
		"contains": func(substr, s string) bool { return strings.Contains(s, substr) },
		"fail":     func(msg string) (string, error) { return "", fmt.Errorf("fail: %s", msg) },
		"int": func(v any) int {
			switch n := v.(type) {
			case int:
				return n
			case int64:
				return int(n)
			case float64:
				return int(n)
			case string:
				i, _ := strconv.Atoi(n)
				return i
			}
			return 0
		},
	}
}

// merge overlays b on a, recursing into maps (Helm's --set / -f).
func merge(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	for k, v := range b {
		if bm, ok := v.(map[string]any); ok {
			if am, ok := out[k].(map[string]any); ok {
				out[k] = merge(am, bm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

type chartMeta struct {
	APIVersion string `json:"apiVersion"`
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

// chartFiles is Helm's .Files: the chart's own files by relative path.
type chartFiles struct{ t *testing.T }

func (f chartFiles) Get(name string) string { return string(readFile(f.t, chartDir+"/"+name)) }

// render renders the chart's templates like `helm template`, with values
// overlaid on values.yaml, and returns its objects.
func render(t *testing.T, release, namespace string, values map[string]any) ([]object, error) {
	t.Helper()
	tpl, ctx, names := chartTemplates(t, release, namespace, values)
	var out []object
	for _, name := range names {
		var b bytes.Buffer
		if err := tpl.ExecuteTemplate(&b, name, ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		text := strings.ReplaceAll(b.String(), "<no value>", "")
		objs, err := decode(chartDir+"/templates/"+name, []byte(text))
		if err != nil {
			return nil, fmt.Errorf("%w\n%s", err, text)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// renderNotes renders templates/NOTES.txt, what helm install prints.
func renderNotes(t *testing.T, release, namespace string, values map[string]any) (string, error) {
	t.Helper()
	tpl, ctx, _ := chartTemplates(t, release, namespace, values)
	var b bytes.Buffer
	err := tpl.ExecuteTemplate(&b, "NOTES.txt", ctx)
	return b.String(), err
}

// chartTemplates parses the chart's templates with values overlaid on
// values.yaml, and lists the manifests among them.
func chartTemplates(t *testing.T, release, namespace string, values map[string]any) (*template.Template, map[string]any, []string) {
	t.Helper()
	var meta chartMeta
	if err := yaml.Unmarshal(readFile(t, chartDir+"/Chart.yaml"), &meta); err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	if err := yaml.Unmarshal(readFile(t, chartDir+"/values.yaml"), &defaults); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	// sigs.k8s.io/yaml gives JSON numbers as float64, as Helm does.
	ctx := map[string]any{
		"Values":  merge(defaults, values),
		"Release": map[string]any{"Name": release, "Namespace": namespace, "Service": "Helm"},
		"Chart":   map[string]any{"Name": meta.Name, "Version": meta.Version, "AppVersion": meta.AppVersion},
		"Files":   chartFiles{t},
	}
	var tpl *template.Template
	tpl = template.New(meta.Name).Funcs(helmFuncs(&tpl)).Option("missingkey=zero")
	files, err := filepath.Glob(filepath.Join(root, chartDir, "templates", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no templates: %v", err)
	}
	sort.Strings(files)
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		if _, err := tpl.New(name).Parse(string(data)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.HasPrefix(name, "_") && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			names = append(names, name)
		}
	}
	return tpl, ctx, names
}
