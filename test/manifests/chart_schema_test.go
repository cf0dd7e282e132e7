package manifests

// values.schema.json refuses bad values with helm's own error, and helm
// lint --strict passes.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rekey.io/rekey/internal/testenv"
)

// TestHelmChartSchema: values.schema.json refuses wrong types, values out
// of range or not in an enum, malformed durations and unknown keys with
// helm's schema error naming the value; the defaults and valid edge values
// pass.
func TestHelmChartSchema(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	const schemaErr = "values don't meet the specifications of the schema"
	bad := []struct{ set, want string }{
		{"replicas=two", "at '/replicas': got string, want integer"},
		{"replicas=-1", "/replicas"},
		{"replica=2", "additional properties 'replica' not allowed"},
		{"instanceConcurrency=0", "/instanceConcurrency"},
		{"terminationGracePeriodSeconds=30", "/terminationGracePeriodSeconds"},
		{"resyncPeriod=5 minutes", "/resyncPeriod"},
		{"defaultGracePeriod=5", "/defaultGracePeriod"},
		{"rotationStuckAfter=never", "/rotationStuckAfter"},
		{"logging.level=verbose", "/logging/level"},
		{"logging.encoder=text", "/logging/encoder"},
		{"metrics.port=70000", "/metrics/port"},
		{"metrics.secure=yes", "/metrics/secure"},
		{"metrics.monitor.kind=Probe", "/metrics/monitor/kind"},
		{"metrics.monitor.interval=often", "/metrics/monitor/interval"},
		{"metrics.alerts.maxCredentialAgeDays=0", "/metrics/alerts/maxCredentialAgeDays"},
		{"metrics.alerts.refusalsFor=soon", "/metrics/alerts/refusalsFor"},
		{"metrics.service.type=ExternalName", "/metrics/service/type"},
		{"image.pullPolicy=Sometimes", "/image/pullPolicy"},
		{"podSecurityContext.runAsUser=0", "/podSecurityContext/runAsUser"},
		{"podDisruptionBudget.minAvailable=half", "/podDisruptionBudget/minAvailable"},
		{"watchNamespaces={Bad_NS}", "/watchNamespaces/0"},
		{"rbac.secretNamespaces={a.b}", "/rbac/secretNamespaces/0"},
		{"extraArgs={-v}", "/extraArgs/0"},
		{"ceph.workDir=relative", "/ceph/workDir"},
		{"ceph.workDirSizeLimit=lots", "/ceph/workDirSizeLimit"},
		{`podLabels.app\.kubernetes\.io/name=x`, "invalid propertyName 'app.kubernetes.io/name'"},
		{"image.digest=latest", "/image/digest"},
		{"extraEnv[0].name=POD_NAMESPACE", "/extraEnv/0/name"},
		{"extraVolumes[0].name=ceph-work", "/extraVolumes/0/name"},
		{"extraVolumeMounts[0].name=ca", "/extraVolumeMounts/0"},
		{"topologySpreadConstraints[0].whenUnsatisfiable=Never", "/topologySpreadConstraints/0"},
		{"metrics.alerts.runbookBaseURL=docs/troubleshooting.md", "/metrics/alerts/runbookBaseURL"},
		{"metrics.dashboard.namespace=Grafana", "/metrics/dashboard/namespace"},
	}
	for _, b := range bad {
		args := []string{"template", "rekey", chartDir, "--namespace", operatorNamespace, "--set", b.set}
		_, stderr, err := tryTool(t, env, helm, args...)
		if err == nil || !strings.Contains(stderr.String(), schemaErr) || !strings.Contains(stderr.String(), b.want) {
			t.Errorf("helm template --set %s: %v, stderr %q; want helm's schema error naming %q", b.set, err, stderr, b.want)
		}
	}
	for _, good := range [][]string{
		{"--set", "rotationStuckAfter=0"},
		{"--set-string", "rotationStuckAfter=0"},
		{"--set", "logging.level=3"},
		{"--set", "podDisruptionBudget.minAvailable=50%", "--set", "replicas=2"},
		{"--set", "replicas=0"},
		{"--set", "metrics.monitor.interval=1m30s"},
	} {
		args := append([]string{"template", "rekey", chartDir, "--namespace", operatorNamespace}, good...)
		if _, stderr, err := tryTool(t, env, helm, args...); err != nil {
			t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
	}
}

// TestHelmLint: helm lint --strict passes on the defaults and with every
// option on, and fails on a value the schema refuses (so the lint does
// check the schema).
func TestHelmLint(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	helm := pinnedTool(t, env, "helm", "helm.sh/helm/v3", "HELM_VERSION")
	everything := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(everything, []byte(`replicas: 2
podAnnotations: {example.com/owner: payments}
podLabels: {team: payments}
priorityClassName: rekey-critical
extraArgs: [--zap-stacktrace-level=panic]
image: {digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
serviceAccount: {annotations: {example.com/role: rekey}}
extraEnv: [{name: HTTPS_PROXY, value: "http://proxy:3128"}]
extraVolumes: [{name: ca, configMap: {name: corporate-ca}}]
extraVolumeMounts: [{name: ca, mountPath: /etc/corporate-ca, readOnly: true}]
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector: {matchLabels: {app.kubernetes.io/name: rekey}}
metrics:
  monitor: {enabled: true, labels: {release: prom}}
  alerts: {enabled: true, runbookBaseURL: "https://wiki.example.com/rekey"}
  dashboard: {enabled: true, namespace: monitoring}
rbac: {clusterWideSecrets: false, secretNamespaces: [apps]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"-f", everything}, {"--set", "watchNamespaces={apps}", "--set", "metrics.monitor.enabled=true", "--set", "metrics.monitor.kind=PodMonitor", "--set", "metrics.monitor.bearerTokenSecret.name=scraper"}} {
		args := append([]string{"lint", "--strict", chartDir}, extra...)
		out := runTool(t, env, helm, args...)
		if !strings.Contains(string(out), "1 chart(s) linted, 0 chart(s) failed") || strings.Contains(string(out), "[WARNING]") || strings.Contains(string(out), "[ERROR]") {
			t.Errorf("helm %s:\n%s", strings.Join(args, " "), out)
		}
	}
	args := []string{"lint", "--strict", chartDir, "--set", "replicas=two"}
	stdout, _, err := tryTool(t, env, helm, args...)
	if err == nil || !strings.Contains(stdout.String(), "/replicas") {
		t.Errorf("helm %s: %v\n%s; want a failure naming /replicas", strings.Join(args, " "), err, stdout)
	}
}
