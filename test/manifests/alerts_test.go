package manifests

// The chart's alert rules: rendered as a PrometheusRule, accepted by the
// pinned promtool, and — fed series shaped like the manager's — firing when
// a person should act and staying quiet otherwise.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"rekey.io/rekey/internal/testenv"
)

// runbookBase is a runbook page other than the default, so the test sees
// the value used.
const runbookBase = "https://wiki.example.com/rekey/troubleshooting"

func TestHelmChartAlertRules(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	promtool, version, err := env.Promtool()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("promtool %s", version)

	what, objs := helmTemplate(t, env, helm, "--set", "metrics.alerts.enabled=true", "--set", "metrics.alerts.labels.release=prom",
		"--set", "metrics.alerts.maxCredentialAgeDays=30", "--set", "metrics.alerts.runbookBaseURL="+runbookBase)
	rules := ofKind(objs, "PrometheusRule")
	if len(rules) != 1 || rules[0].GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Fatalf("%s renders %d PrometheusRules, want one monitoring.coreos.com/v1", what, len(rules))
	}
	pr := rules[0]
	if pr.GetNamespace() != operatorNamespace || pr.GetLabels()["release"] != "prom" {
		t.Errorf("%s: %s in %q with labels %v, want %s and release=prom", what, describe(pr), pr.GetNamespace(), pr.GetLabels(), operatorNamespace)
	}
	groups, ok, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	if !ok {
		t.Fatalf("%s: %s has no spec.groups", what, describe(pr))
	}
	dir := t.TempDir()
	writeYAML(t, filepath.Join(dir, "rules.yaml"), map[string]any{"groups": groups})

	out := runTool(t, env, promtool, "check", "rules", filepath.Join(dir, "rules.yaml"))
	if !strings.Contains(string(out), "SUCCESS: 5 rules found") {
		t.Fatalf("promtool check rules: %s", out)
	}

	// Series as the manager exposes them (the pod label is what a scrape
	// adds); times are minutes from the start.
	series := []map[string]string{
		// A rotation that becomes stuck at minute 2 and stays so.
		{"series": `rekey_rotation_stuck{namespace="shop",name="orders",pod="rekey-0"}`, "values": "0 0 1x30"},
		// Two unlisted sets' rotations stuck from minute 2.
		{"series": `rekey_unlisted_rotations_stuck{pod="rekey-0"}`, "values": "0 0 2x30"},
		// A healthy set.
		{"series": `rekey_rotation_stuck{namespace="shop",name="billing",pod="rekey-0"}`, "values": "0x30"},
		// Credentials an hour short of 30 days old at the start, growing a
		// minute a minute.
		{"series": `rekey_credential_age_seconds{namespace="shop",name="orders",pod="rekey-0"}`, "values": "2588400+60x180"},
		// A refusal retried every 10 s for the whole run…
		{"series": `rekey_refusals_total{namespace="shop",name="orders",reason="InstanceUnreachable",pod="rekey-0"}`, "values": "0+6x60"},
		// …and one that passed after a minute (an instance that restarted).
		{"series": `rekey_refusals_total{namespace="shop",name="billing",reason="InstanceUnreachable",pod="rekey-0"}`, "values": "0 6 6x60"},
		// A rotation rolled back by recover at minute 5; completed ones do
		// not alert.
		{"series": `rekey_rotations_total{namespace="shop",name="orders",result="failed",pod="rekey-0"}`, "values": "0x4 1x120"},
		{"series": `rekey_rotations_total{namespace="shop",name="billing",result="completed",pod="rekey-0"}`, "values": "0 1 2 3x120"},
	}
	alert := func(name string, labels map[string]string, summary, description, anchor string) map[string]any {
		l := map[string]string{"severity": "warning", "namespace": "shop", "name": "orders"}
		for k, v := range labels {
			l[k] = v
		}
		return map[string]any{"exp_labels": l, "exp_annotations": map[string]string{"summary": summary, "description": description,
			"runbook_url": runbookBase + "#" + anchor}}
	}
	none := []any{}
	stuck := alert("RekeyRotationStuck", nil, "rotation of CredentialSet shop/orders is stuck",
		"the rotation has been active longer than its stuckAfter; kubectl rekey status orders -n shop says what it waits for and the next step", "rotationstuck")
	refused := alert("RekeyRefusalsPersist", map[string]string{"reason": "InstanceUnreachable"},
		"CredentialSet shop/orders keeps being refused: InstanceUnreachable",
		"rekey has refused or held a phase (InstanceUnreachable) for a while; the set's latest Warning Event and kubectl rekey status orders -n shop name the next step", "instanceunreachable")
	failed := alert("RekeyRotationFailed", nil, "a rotation of CredentialSet shop/orders was rolled back because it could not go on",
		"kubectl rekey recover rolled it back to the current credentials; the set's Events say what was wrong before the next rotation", "rekeyrotationfailed")
	overdue := alert("RekeyCredentialsOverdue", nil, "credentials of CredentialSet shop/orders are older than 30 days",
		"they have been current for 30d 1h 30m 0s; rotate them (kubectl rekey rotate orders -n shop) or check why the rotation policy did not", "rekeycredentialsoverdue")
	unlisted := map[string]any{"exp_labels": map[string]string{"severity": "warning"}, "exp_annotations": map[string]string{
		"summary":     "2 rotation(s) of CredentialSets without metric series of their own are stuck",
		"description": "these sets are over the manager's --metrics-max-sets or --metrics-max-sets-per-namespace; kubectl rekey status -A lists every set with its next step",
		"runbook_url": runbookBase + "#rotationstuck"}}
	tests := []map[string]any{{
		"interval":     "1m",
		"input_series": series,
		"alert_rule_test": []map[string]any{
			{"eval_time": "4m", "alertname": "RekeyRotationStuck", "exp_alerts": none}, // pending: 5m not over
			{"eval_time": "10m", "alertname": "RekeyRotationStuck", "exp_alerts": []any{stuck}},
			{"eval_time": "4m", "alertname": "RekeyUnlistedRotationStuck", "exp_alerts": none},
			{"eval_time": "10m", "alertname": "RekeyUnlistedRotationStuck", "exp_alerts": []any{unlisted}},
			{"eval_time": "20m", "alertname": "RekeyRefusalsPersist", "exp_alerts": none}, // pending: 30m not over
			{"eval_time": "45m", "alertname": "RekeyRefusalsPersist", "exp_alerts": []any{refused}},
			{"eval_time": "10m", "alertname": "RekeyRotationFailed", "exp_alerts": []any{failed}},
			{"eval_time": "70m", "alertname": "RekeyRotationFailed", "exp_alerts": none}, // an hour later
			// 30 days are passed at minute 60; an hour later it fires.
			{"eval_time": "90m", "alertname": "RekeyCredentialsOverdue", "exp_alerts": none},
			{"eval_time": "150m", "alertname": "RekeyCredentialsOverdue", "exp_alerts": []any{overdue}},
		},
	}}
	writeYAML(t, filepath.Join(dir, "tests.yaml"), map[string]any{"rule_files": []string{"rules.yaml"}, "evaluation_interval": "1m", "tests": tests})
	out = runTool(t, env, promtool, "test", "rules", filepath.Join(dir, "tests.yaml"))
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %s", out)
	}

	// The rules read rekey's metrics: no metrics, no rules.
	args := []string{"template", "rekey", chartDir, "--namespace", operatorNamespace, "--set", "metrics.alerts.enabled=true", "--set", "metrics.enabled=false"}
	if _, stderr, err := tryTool(t, env, helm, args...); err == nil || !strings.Contains(stderr.String(), "metrics.alerts.enabled needs metrics.enabled") {
		t.Errorf("helm %s: %v %s; want a failure naming metrics.enabled", strings.Join(args, " "), err, stderr)
	}
}

func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
