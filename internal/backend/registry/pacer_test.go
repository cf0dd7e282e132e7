package registry

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPacerOf: the first registered operator that owns a StatefulSet
// paces it, with the owner it names; one nobody owns is paced by none.
func TestPacerOf(t *testing.T) {
	isolate(t)
	byLabel := func(name, label string) Pacer {
		return Pacer{Name: name, Owner: func(sts *appsv1.StatefulSet) (string, string) { return "Cluster", sts.Labels[label] }}
	}
	RegisterPacer(byLabel("first", "a"))
	RegisterPacer(byLabel("second", "b"))
	sts := func(labels map[string]string) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	}
	for _, c := range []struct {
		labels            map[string]string
		pacer, kind, name string
	}{
		{map[string]string{"b": "db"}, "second", "Cluster", "db"},
		{map[string]string{"a": "x", "b": "y"}, "first", "Cluster", "x"},
		{nil, "", "", ""},
	} {
		p, kind, name, ok := PacerOf(sts(c.labels))
		if p.Name != c.pacer || kind != c.kind || name != c.name || ok != (c.pacer != "") {
			t.Errorf("PacerOf(%v) = %q, %s/%s, %v; want %q, %s/%s", c.labels, p.Name, kind, name, ok, c.pacer, c.kind, c.name)
		}
	}
}
