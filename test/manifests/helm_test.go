package manifests

import (
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

func TestChartMetadata(t *testing.T) {
	var meta chartMeta
	if err := yaml.Unmarshal(readFile(t, chartDir+"/Chart.yaml"), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.APIVersion != "v2" || meta.Name != "rekey" || meta.Version != "0.1.0" || meta.AppVersion != "v0.1.0" {
		t.Errorf("Chart.yaml: %+v", meta)
	}
}

// TestChartRBAC renders the chart with cluster-wide Secrets (the default)
// and with Secrets limited to listed namespaces, and checks both grant the
// manager exactly what it uses.
func TestChartRBAC(t *testing.T) {
	cases := []struct {
		name           string
		values         map[string]any
		secretNS       []string
		leaderElection bool
		watch          []string // namespaced mode
	}{
		{"defaults", nil, []string{""}, true, nil},
		{"narrowed", map[string]any{"rbac": map[string]any{
			"clusterWideSecrets": false, "secretNamespaces": []any{"shop", "orders"}}},
			[]string{"shop", "orders"}, true, nil},
		{"single replica without leader election", map[string]any{"replicas": 1, "leaderElection": map[string]any{"enabled": false}},
			[]string{""}, false, nil},
		{"namespaced mode", map[string]any{"watchNamespaces": []any{"shop", "orders"}},
			[]string{"shop", "orders"}, true, []string{"shop", "orders"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs, err := render(t, "rekey", "ops", c.values)
			if err != nil {
				t.Fatal(err)
			}
			what := "chart (" + c.name + ")"
			for _, o := range objs {
				if !clusterScoped[o.meta.Kind] && o.meta.Metadata.Namespace == "" {
					t.Errorf("%s: %s has no namespace", what, o)
				}
			}
			r := loadRBAC(t, objs)
			checkRules(t, what, r)
			checkGrants(t, what, effective(t, what, r, "ops", "rekey-controller-manager"), needed("ops", c.secretNS, c.leaderElection, c.watch...))
			checkUserRoles(t, what, r, "rekey")
			checkDeployment(t, objs, "rekey-controller-manager", c.leaderElection)
		})
	}
}

// TestChartRefusesReplicasWithoutLeaderElection: two managers without a
// leader would both rotate the same sets.
func TestChartRefusesReplicasWithoutLeaderElection(t *testing.T) {
	_, err := render(t, "rekey", "ops", map[string]any{"replicas": 2, "leaderElection": map[string]any{"enabled": false}})
	if err == nil || !strings.Contains(err.Error(), "leaderElection") {
		t.Errorf("want a failure naming leaderElection, got %v", err)
	}
}

// TestChartWithoutRBAC: rbac.create=false renders no RBAC objects.
func TestChartWithoutRBAC(t *testing.T) {
	objs, err := render(t, "rekey", "ops", map[string]any{"rbac": map[string]any{"create": false}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if strings.HasPrefix(o.meta.APIVersion, "rbac.authorization.k8s.io/") {
			t.Errorf("rbac.create=false still renders %s", o)
		}
	}
}

// TestChartSetsEveryManagerFlag: every flag cmd/manager defines has a chart
// value that sets it, so a new flag without a value fails here. (The chart
// sets --secret-namespaces only with narrowed Secrets, and
// --watch-namespaces only in namespaced mode.)
func TestChartSetsEveryManagerFlag(t *testing.T) {
	set := map[string]bool{}
	for _, values := range []map[string]any{
		nil,
		{"rbac": map[string]any{"clusterWideSecrets": false, "secretNamespaces": []any{"apps"}}},
		{"watchNamespaces": []any{"apps"}},
		{"moco": map[string]any{"namespace": "moco-system"}},
	} {
		objs, err := render(t, "rekey", "ops", values)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.meta.Kind != "Deployment" {
				continue
			}
			var dep appsv1.Deployment
			if err := yaml.UnmarshalStrict(o.raw, &dep); err != nil {
				t.Fatal(err)
			}
			for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
				name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				set[name] = true
			}
		}
	}
	for f := range managerFlags(t) {
		if !set[f] {
			t.Errorf("no chart value sets --%s: add one to values.yaml, values.schema.json and charts/rekey/README.md", f)
		}
	}
	for _, f := range []string{"zap-log-level", "zap-encoder"} {
		if !set[f] {
			t.Errorf("the chart does not set --%s (logging.*)", f)
		}
	}
}

// TestChartReadmeDocumentsEveryValue: every value in values.yaml is named
// in the first column of charts/rekey/README.md's table (as `path`, or a
// parent `path` whose content is free-form, such as resources).
func TestChartReadmeDocumentsEveryValue(t *testing.T) {
	var values map[string]any
	if err := yaml.Unmarshal(readFile(t, chartDir+"/values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	// The first cell of each table row of the README.
	var firstCells []string
	for _, line := range strings.Split(string(readFile(t, chartDir+"/README.md")), "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 && strings.TrimSpace(cells[0]) == "" {
			firstCells = append(firstCells, cells[1])
		}
	}
	documented := func(path string) bool {
		for _, c := range firstCells {
			if strings.Contains(c, "`"+path+"`") {
				return true
			}
		}
		return false
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		if documented(path) {
			return
		}
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for k, child := range m {
				walk(path+"."+k, child)
			}
			return
		}
		t.Errorf("%s/README.md does not document the value `%s`", chartDir, path)
	}
	for k, v := range values {
		walk(k, v)
	}
}

// TestReadmeFlagsTable: README.md's manager flags table has a row for every
// flag cmd/manager defines, and every chart value it names exists in
// values.yaml.
func TestReadmeFlagsTable(t *testing.T) {
	var values map[string]any
	if err := yaml.Unmarshal(readFile(t, chartDir+"/values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	exists := func(path string) bool {
		var v any = values
		for _, k := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				return false
			}
			if v, ok = m[k]; !ok {
				return false
			}
		}
		return true
	}
	readme := string(readFile(t, "README.md"))
	_, table, ok := strings.Cut(readme, "### Manager flags\n")
	if !ok {
		t.Fatal("README.md has no \"### Manager flags\" section")
	}
	rows := map[string]bool{}
	code := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(line), "| `--") {
			if len(rows) > 0 {
				break // the end of the table
			}
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			rows[strings.TrimPrefix(m[1], "--")] = true
		}
		for _, m := range code.FindAllStringSubmatch(cells[3], -1) {
			if v, _, _ := strings.Cut(m[1], ":"); !exists(v) {
				t.Errorf("README.md's flags table names chart value %q, which values.yaml does not have", v)
			}
		}
	}
	for f := range managerFlags(t) {
		if !rows[f] {
			t.Errorf("README.md's flags table has no row for --%s", f)
		}
	}
}
