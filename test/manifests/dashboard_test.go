package manifests

// The Grafana dashboard and the alert rules, in both installs: the same
// JSON and rules in the chart and in config/, and every series they query
// is one the manager's metrics registry really exports, with the labels
// and label values it exports.

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/metrics"
	"rekey.io/rekey/internal/testenv"
)

const (
	dashboardFile      = "config/grafana/rekey-dashboard.json"
	chartDashboardFile = chartDir + "/dashboards/rekey.json"
	kustomizeRulesFile = "config/prometheus/prometheusrule.yaml"
)

// exportedSeries drives every recording function of internal/metrics for
// one set, then gathers the manager's registry: family → label → values.
// A histogram is also listed under its _bucket (with le), _sum and _count.
func exportedSeries(t *testing.T) map[string]map[string]map[string]bool {
	t.Helper()
	const ns, name = "dashboard-test", "orders"
	now := metav1.NewTime(time.Now().Add(-time.Hour))
	metrics.Observe(ns, name, &v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, CurrentSince: &now, LastRotationID: "r1"})
	metrics.Coverage(ns, name, []v1.ConsumerStatus{{Kind: v1.KindDeployment, Name: "api", RolledOut: true},
		{Kind: v1.KindGroup, Name: "workers", MembersUpdated: []string{"w1"}}},
		[]v1.ConsumerGroup{{Name: "workers", Members: []string{"w1", "w2"}}})
	metrics.Stuck(ns, name, false)
	metrics.Failures(ns, name, 0)
	metrics.Retired(ns, name)
	metrics.Refused(ns, name, "BackendError")
	metrics.PhaseEnded("Rotating", time.Second)
	metrics.Ended(ns, name, metrics.ResultCompleted)
	fams, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]map[string]bool{}
	add := func(family string, labels map[string]string) {
		if out[family] == nil {
			out[family] = map[string]map[string]bool{}
		}
		for k, v := range labels {
			if out[family][k] == nil {
				out[family][k] = map[string]bool{}
			}
			out[family][k][v] = true
		}
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if m.Histogram == nil {
				add(f.GetName(), labels)
				continue
			}
			add(f.GetName()+"_sum", labels)
			add(f.GetName()+"_count", labels)
			bucket := map[string]string{"le": "+Inf"}
			for k, v := range labels {
				bucket[k] = v
			}
			add(f.GetName()+"_bucket", bucket)
		}
	}
	return out
}

// reasons parses internal/reason: every Reason constant, and those of the
// Warning Events block.
func reasons(t *testing.T) (all, warning []string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, root+"/internal/reason/reason.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		isWarning := g.Doc != nil && strings.Contains(g.Doc.Text(), "(Warning Events)")
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
				r, _ := strconv.Unquote(lit.Value)
				all = append(all, r)
				if isWarning {
					warning = append(warning, r)
				}
			}
		}
	}
	if len(warning) < 20 {
		t.Fatalf("found %d Warning reasons in internal/reason: %v", len(warning), warning)
	}
	return all, warning
}

// dashboardQueries walks the dashboard JSON for every panel target's expr
// and every templating query.
func dashboardQueries(t *testing.T, data []byte) (exprs, templating []string) {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if s, ok := c.(string); ok && k == "expr" {
					exprs = append(exprs, s)
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(d["panels"])
	tl, _, _ := unstructured.NestedSlice(d, "templating", "list")
	for _, v := range tl {
		if q, ok, _ := unstructured.NestedString(v.(map[string]any), "query", "query"); ok {
			templating = append(templating, q)
		}
	}
	return exprs, templating
}

// alertRules are the rules of a PrometheusRule object.
func alertRules(t *testing.T, what string, raw []byte) []map[string]any {
	t.Helper()
	var pr map[string]any
	if err := yaml.Unmarshal(raw, &pr); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	groups, _, _ := unstructured.NestedSlice(pr, "spec", "groups")
	var out []map[string]any
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			out = append(out, r.(map[string]any))
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no rules", what)
	}
	return out
}

// chartAlertRules renders the chart's PrometheusRule in-process with the
// given alert values.
func chartAlertRules(t *testing.T, alerts map[string]any) []map[string]any {
	t.Helper()
	alerts["enabled"] = true
	objs, err := render(t, "rekey", operatorNamespace, map[string]any{"metrics": map[string]any{"alerts": alerts}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.meta.Kind == "PrometheusRule" {
			return alertRules(t, o.String(), o.raw)
		}
	}
	t.Fatal("the chart renders no PrometheusRule with metrics.alerts.enabled")
	return nil
}

var literalAlternation = regexp.MustCompile(`^[A-Za-z0-9_.+-]+(\|[A-Za-z0-9_.+-]+)*$`)

// checkQuery: every selector of expr names an exported series, matches
// only labels it has, and — where a label's values are a closed set
// (phase, result, state, reason) — only values it takes.
func checkQuery(t *testing.T, what, expr string, exported map[string]map[string]map[string]bool, allReasons []string) []string {
	t.Helper()
	sels, err := promSelectors(expr)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return nil
	}
	if len(sels) == 0 {
		t.Errorf("%s: %q selects no series", what, expr)
	}
	var names []string
	for _, s := range sels {
		names = append(names, s.name)
		fam, ok := exported[s.name]
		if !ok {
			t.Errorf("%s: %q queries %s, which the manager does not export", what, expr, s.name)
			continue
		}
		for _, m := range s.matchers {
			values, ok := fam[m.label]
			if !ok {
				t.Errorf("%s: %q matches label %s, which %s does not have", what, expr, m.label, s.name)
				continue
			}
			if strings.Contains(m.value, "$") || !literalAlternation.MatchString(m.value) || strings.HasPrefix(m.op, "!") {
				continue
			}
			for _, v := range strings.Split(m.value, "|") {
				switch {
				case m.label == "reason":
					if !slices.Contains(allReasons, v) {
						t.Errorf("%s: %q matches reason %q, which internal/reason does not define", what, expr, v)
					}
				case m.label == "phase" || m.label == "result" || m.label == "state":
					if !values[v] {
						t.Errorf("%s: %q matches %s=%q; %s takes %v", what, expr, m.label, v, s.name, slices.Sorted(maps.Keys(values)))
					}
				}
			}
		}
	}
	return names
}

// TestDashboardAndAlertsReadExportedMetrics: every series the dashboard's
// panels and variables and the alert rules (the chart's and config/'s)
// query is exported by the manager's registry, with those labels; and the
// dashboard covers rotations, failures, phases, backend errors and
// consumer rollouts.
func TestDashboardAndAlertsReadExportedMetrics(t *testing.T) {
	exported := exportedSeries(t)
	allReasons, _ := reasons(t)
	exprs, templating := dashboardQueries(t, readFile(t, dashboardFile))
	if len(exprs) < 15 {
		t.Fatalf("%s: %d queries, want the panels' (15 or more)", dashboardFile, len(exprs))
	}
	used := map[string]bool{}
	for _, e := range exprs {
		for _, n := range checkQuery(t, dashboardFile, e, exported, allReasons) {
			used[n] = true
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)
	for _, q := range templating {
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("%s: variable query %q, want label_values(metric, label)", dashboardFile, q)
			continue
		}
		if _, ok := exported[m[1]][m[2]]; !ok {
			t.Errorf("%s: variable query %q: the manager exports no %s with label %s", dashboardFile, q, m[1], m[2])
		}
	}
	for what, metric := range map[string]string{
		"rotations": "rekey_rotations_total", "failures": "rekey_consecutive_failures", "phases": "rekey_credentialset_phase",
		"phase durations": "rekey_phase_duration_seconds_bucket", "backend errors and refusals": "rekey_refusals_total",
		"consumer rollouts": "rekey_consumers", "group members": "rekey_group_members", "stuck rotations": "rekey_rotation_stuck",
		"credential age": "rekey_credential_age_seconds",
	} {
		if !used[metric] {
			t.Errorf("%s: no panel shows %s (%s)", dashboardFile, what, metric)
		}
	}

	kobjs, err := decode(kustomizeRulesFile, readFile(t, kustomizeRulesFile))
	if err != nil || len(kobjs) != 1 {
		t.Fatalf("%s: %v", kustomizeRulesFile, err)
	}
	for what, rules := range map[string][]map[string]any{
		kustomizeRulesFile:           alertRules(t, kustomizeRulesFile, kobjs[0].raw),
		"the chart's PrometheusRule": chartAlertRules(t, map[string]any{}),
	} {
		for _, r := range rules {
			expr, _ := r["expr"].(string)
			checkQuery(t, what+" "+r["alert"].(string), expr, exported, allReasons)
		}
	}
}

// TestDashboardAndAlertsShippedInBoth: the chart's dashboard is config/'s
// JSON, rendered by helm as a ConfigMap for Grafana's sidecar (labelled,
// in the namespace asked for) and by kustomize from config/grafana; the
// chart's alert rules with their defaults are config/prometheus's.
func TestDashboardAndAlertsShippedInBoth(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	kustomize := pinnedTool(t, env, "kustomize", "sigs.k8s.io/kustomize/kustomize/v5", "KUSTOMIZE_VERSION")
	dashboard := readFile(t, dashboardFile)
	if string(dashboard) != string(readFile(t, chartDashboardFile)) {
		t.Fatalf("%s differs from %s: cp %s %s", chartDashboardFile, dashboardFile, dashboardFile, chartDashboardFile)
	}
	var d struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			ID    int    `json:"id"`
			Title string `json:"title"`
			Type  string `json:"type"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil || d.UID == "" || d.Title == "" {
		t.Fatalf("%s: uid %q title %q: %v", dashboardFile, d.UID, d.Title, err)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || p.Title == "" {
			t.Errorf("%s: panel %d %q: ids must be unique and titles given", dashboardFile, p.ID, p.Title)
		}
		ids[p.ID] = true
	}

	checkConfigMap := func(what string, objs []*unstructured.Unstructured, ns string) {
		t.Helper()
		cms := ofKind(objs, "ConfigMap")
		if len(cms) != 1 {
			t.Fatalf("%s renders %d ConfigMaps, want the dashboard's", what, len(cms))
		}
		cm := cms[0]
		data, _, _ := unstructured.NestedString(cm.Object, "data", "rekey.json")
		if cm.GetName() != "rekey-dashboard" || cm.GetNamespace() != ns || cm.GetLabels()["grafana_dashboard"] != "1" {
			t.Errorf("%s: %s with labels %v, want rekey-dashboard in %s labelled grafana_dashboard=1", what, describe(cm), cm.GetLabels(), ns)
		}
		if strings.TrimSpace(data) != strings.TrimSpace(string(dashboard)) {
			t.Errorf("%s: the ConfigMap's rekey.json is not %s", what, dashboardFile)
		}
	}
	what, objs := helmTemplate(t, env, helm, "--set", "metrics.dashboard.enabled=true", "--set", "metrics.dashboard.namespace=monitoring")
	checkConfigMap(what, objs, "monitoring")
	what, objs = helmTemplate(t, env, helm, "--set", "metrics.dashboard.enabled=true")
	checkConfigMap(what, objs, operatorNamespace)
	if _, objs = helmTemplate(t, env, helm); len(ofKind(objs, "ConfigMap")) != 0 {
		t.Error("the chart renders a ConfigMap by default")
	}
	args := []string{"template", "rekey", chartDir, "--set", "metrics.dashboard.enabled=true", "--set", "metrics.enabled=false"}
	if _, stderr, err := tryTool(t, env, helm, args...); err == nil || !strings.Contains(stderr.String(), "metrics.dashboard.enabled needs metrics.enabled") {
		t.Errorf("helm %s: %v %s; want a failure naming metrics.enabled", strings.Join(args, " "), err, stderr)
	}
	checkConfigMap("config/grafana", unstructuredObjects(t, "config/grafana", runTool(t, env, kustomize, "build", "config/grafana")), operatorNamespace)

	// The alert rules: the chart's with its defaults are config/prometheus's.
	what, objs = helmTemplate(t, env, helm, "--set", "metrics.alerts.enabled=true")
	chartRules := ofKind(objs, "PrometheusRule")
	krules := ofKind(unstructuredObjects(t, "config/prometheus", runTool(t, env, kustomize, "build", "config/prometheus")), "PrometheusRule")
	if len(chartRules) != 1 || len(krules) != 1 {
		t.Fatalf("%s renders %d PrometheusRules, config/prometheus %d; want one each", what, len(chartRules), len(krules))
	}
	if chartRules[0].GetName() != krules[0].GetName() || chartRules[0].GetNamespace() != krules[0].GetNamespace() {
		t.Errorf("PrometheusRule %s in the chart, %s in config/prometheus: want one name", describe(chartRules[0]), describe(krules[0]))
	}
	if cs, ks := chartRules[0].Object["spec"], krules[0].Object["spec"]; !reflect.DeepEqual(cs, ks) {
		cy, _ := yaml.Marshal(cs)
		ky, _ := yaml.Marshal(ks)
		t.Errorf("the chart's alert rules with their defaults differ from %s:\n--- chart\n%s\n--- kustomize\n%s", kustomizeRulesFile, cy, ky)
	}
}
