package plugin

import (
	"fmt"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/jsonpath"
)

// customColumns is -o custom-columns=HEADER:PATH,...: kubectl's format
// (its relaxed JSONPath, <none> for a missing value, several values joined
// by commas), rendered as a table for cli-runtime's table printer, so that
// --no-headers and -w behave as with the status table.
type customColumns struct {
	headers []string
	paths   []*jsonpath.JSONPath
}

const customColumnsPrefix = "custom-columns="

func parseCustomColumns(spec string) (*customColumns, error) {
	spec = strings.TrimPrefix(spec, customColumnsPrefix)
	if spec == "" {
		return nil, fmt.Errorf("custom-columns needs at least one HEADER:PATH, e.g. custom-columns=NAME:.metadata.name,PHASE:.status.phase")
	}
	c := &customColumns{}
	for _, part := range strings.Split(spec, ",") {
		header, path, ok := strings.Cut(part, ":")
		if !ok || header == "" || path == "" {
			return nil, fmt.Errorf("custom-columns: %q is not HEADER:PATH (e.g. PHASE:.status.phase)", part)
		}
		expr, err := relaxedJSONPath(path)
		if err != nil {
			return nil, err
		}
		p := jsonpath.New(header).AllowMissingKeys(true)
		if err := p.Parse(expr); err != nil {
			return nil, fmt.Errorf("custom-columns: column %s: %w", header, err)
		}
		c.headers, c.paths = append(c.headers, header), append(c.paths, p)
	}
	return c, nil
}

var relaxedPath = regexp.MustCompile(`^\{?(\.?[^{}]*)\}?$`)

// relaxedJSONPath accepts .status.phase, status.phase and {.status.phase}
// alike, as kubectl does.
func relaxedJSONPath(path string) (string, error) {
	m := relaxedPath.FindStringSubmatch(path)
	if m == nil {
		return "", fmt.Errorf("custom-columns: %q is not a JSONPath such as .status.phase", path)
	}
	p := m[1]
	if !strings.HasPrefix(p, ".") {
		p = "." + p
	}
	return "{" + p + "}", nil
}

// table is objs as the custom columns say.
func (c *customColumns) table(objs []runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{}
	for _, h := range c.headers {
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: h, Type: "string"})
	}
	for _, o := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		row := metav1.TableRow{Object: runtime.RawExtension{Object: o}}
		for _, p := range c.paths {
			results, err := p.FindResults(u)
			if err != nil {
				return nil, err
			}
			var vals []string
			for _, r := range results {
				for _, v := range r {
					vals = append(vals, fmt.Sprintf("%v", v.Interface()))
				}
			}
			cell := strings.Join(vals, ",")
			if len(vals) == 0 {
				cell = "<none>"
			}
			row.Cells = append(row.Cells, cell)
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}
