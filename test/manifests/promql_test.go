package manifests

// The series a PromQL expression selects: metric names and their label
// matchers, enough to check the dashboard's and the alerts' queries
// against what the manager exports. Not a PromQL parser: it knows the
// aggregations, keywords and function-call shape, and skips strings,
// range brackets and grouping label lists.

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

type promMatcher struct{ label, op, value string }

type promSelector struct {
	name     string
	matchers []promMatcher
}

// Aggregations may take their grouping before the parenthesis
// (`sum by (x) (...)`), so they are never metric names.
var promAggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "count": true, "stddev": true, "stdvar": true,
	"topk": true, "bottomk": true, "quantile": true, "count_values": true, "group": true,
	"limitk": true, "limit_ratio": true,
}

// Keywords followed by a label list to skip.
var promGrouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

var promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdent(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// promSelectors lists the series selectors of expr in order.
func promSelectors(expr string) ([]promSelector, error) {
	var out []promSelector
	skipSpace := func(i int) int {
		for i < len(expr) && strings.ContainsRune(" \t\r\n", rune(expr[i])) {
			i++
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '[':
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unclosed [ at %d in %q", i, expr)
			}
			i += end + 1
		case c == '{':
			return nil, fmt.Errorf("a selector without a metric name at %d in %q", i, expr)
		case c >= '0' && c <= '9':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
			ident := expr[start:i]
			next := skipSpace(i)
			switch {
			case promGrouping[strings.ToLower(ident)]:
				if next < len(expr) && expr[next] == '(' {
					end := strings.IndexByte(expr[next:], ')')
					if end < 0 {
						return nil, fmt.Errorf("unclosed label list after %s in %q", ident, expr)
					}
					i = next + end + 1
				}
			case promKeywords[strings.ToLower(ident)], promAggregations[ident]:
			case next < len(expr) && expr[next] == '(':
				// a function call
			default:
				sel := promSelector{name: ident}
				if next < len(expr) && expr[next] == '{' {
					ms, end, err := promMatchers(expr, next)
					if err != nil {
						return nil, err
					}
					sel.matchers, i = ms, end
				}
				out = append(out, sel)
			}
		default:
			i++
		}
	}
	return out, nil
}

// skipString returns the index after the string literal starting at i.
func skipString(expr string, i int) (int, error) {
	q := expr[i]
	for j := i + 1; j < len(expr); j++ {
		switch {
		case expr[j] == '\\' && q != '`':
			j++
		case expr[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string at %d in %q", i, expr)
}

// promMatchers parses `{label op "value", ...}` starting at the brace.
func promMatchers(expr string, i int) ([]promMatcher, int, error) {
	var out []promMatcher
	i++ // {
	for {
		for i < len(expr) && strings.ContainsRune(" \t\r\n,", rune(expr[i])) {
			i++
		}
		if i >= len(expr) {
			return nil, 0, fmt.Errorf("unclosed { in %q", expr)
		}
		if expr[i] == '}' {
			return out, i + 1, nil
		}
		start := i
		for i < len(expr) && isIdent(expr[i]) {
			i++
		}
		label := expr[start:i]
		for i < len(expr) && expr[i] == ' ' {
			i++
		}
		opStart := i
		for i < len(expr) && strings.ContainsRune("=!~", rune(expr[i])) {
			i++
		}
		op := expr[opStart:i]
		for i < len(expr) && expr[i] == ' ' {
			i++
		}
		if label == "" || (op != "=" && op != "!=" && op != "=~" && op != "!~") || i >= len(expr) || !strings.ContainsRune("\"'`", rune(expr[i])) {
			return nil, 0, fmt.Errorf("malformed matcher at %d in %q", start, expr)
		}
		end, err := skipString(expr, i)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, promMatcher{label, op, expr[i+1 : end-1]})
		i = end
	}
}

func TestPromSelectors(t *testing.T) {
	cases := []struct {
		expr string
		want []promSelector
	}{
		{`max by (namespace, name) (rekey_rotation_stuck) == 1`, []promSelector{{name: "rekey_rotation_stuck"}}},
		{`sum(rate(x_total{a="1", b=~"p|q"}[$__rate_interval])) by (a) / on (a) group_left y`,
			[]promSelector{{"x_total", []promMatcher{{"a", "=", "1"}, {"b", "=~", "p|q"}}}, {name: "y"}}},
		{`histogram_quantile(0.95, sum by (le, phase) (rate(h_bucket[5m])))`, []promSelector{{name: "h_bucket"}}},
		{`time() - max(ts{n!="a,b}"}) > 90 * 86400 or vector(0)`, []promSelector{{"ts", []promMatcher{{"n", "!=", "a,b}"}}}}},
		{`count(m{namespace=~"$namespace"} offset 1h > 0) and bool madeup_metric`,
			[]promSelector{{"m", []promMatcher{{"namespace", "=~", "$namespace"}}}, {name: "madeup_metric"}}},
	}
	for _, c := range cases {
		got, err := promSelectors(c.expr)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("promSelectors(%q) = %+v, %v; want %+v", c.expr, got, err, c.want)
		}
	}
	for _, bad := range []string{`{__name__="x"}`, `x{a="1"`, `x{a}`, `x[5m`} {
		if _, err := promSelectors(bad); err == nil {
			t.Errorf("promSelectors(%q): no error", bad)
		}
	}
}
