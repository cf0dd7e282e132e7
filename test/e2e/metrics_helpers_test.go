package e2e

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// metricValue reads one series of the in-process manager's registry.
func metricValue(t testing.TB, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	fams, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// assertNoSecretInMetrics scans every exposed label and name.
func assertNoSecretInMetrics(t testing.TB, secrets ...string) {
	t.Helper()
	fams, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range fams {
		b.WriteString(f.String())
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(b.String(), s) {
			t.Fatal("a secret appears in the metrics")
		}
	}
}

// assertRotationResults waits for rekey_rotations_total of the set to count
// completed, aborted and failed rotations (the counter is bumped right after
// the status write the test saw).
func assertRotationResults(t testing.TB, ns, name string, completed, aborted, failed float64) {
	t.Helper()
	want := map[string]float64{"completed": completed, "aborted": aborted, "failed": failed}
	eventually(t, 10*time.Second, "rekey_rotations_total by result", func() (bool, string) {
		got := map[string]float64{}
		for r := range want {
			v, ok := metricValue(t, "rekey_rotations_total", map[string]string{"namespace": ns, "name": name, "result": r})
			if !ok {
				return false, fmt.Sprintf("no series for result %q", r)
			}
			got[r] = v
		}
		return maps.Equal(got, want), fmt.Sprintf("got %v, want %v", got, want)
	})
}
