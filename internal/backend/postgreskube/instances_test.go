package postgreskube

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestPodHosts(t *testing.T) {
	sts := func(replicas *int32, svc string) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "pg"},
			Spec: appsv1.StatefulSetSpec{Replicas: replicas, ServiceName: svc}}
	}
	for _, c := range []struct {
		name string
		sts  *appsv1.StatefulSet
		ref  v1.PostgresStatefulSet
		want []string
	}{
		{"the StatefulSet's Service and the default port", sts(ptr.To(int32(2)), "pg-hl"), v1.PostgresStatefulSet{Name: "pg"},
			[]string{"pg-0.pg-hl.team.svc:5432", "pg-1.pg-hl.team.svc:5432"}},
		{"a Service and port of the set's", sts(ptr.To(int32(1)), "pg-hl"), v1.PostgresStatefulSet{Name: "pg", ServiceName: "pods", Port: 6432},
			[]string{"pg-0.pods.team.svc:6432"}},
		{"replicas unset is one", sts(nil, "pg-hl"), v1.PostgresStatefulSet{Name: "pg"}, []string{"pg-0.pg-hl.team.svc:5432"}},
		{"scaled to zero", sts(ptr.To(int32(0)), "pg-hl"), v1.PostgresStatefulSet{Name: "pg"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := podHosts(c.sts, c.ref); !slices.Equal(got, c.want) {
				t.Fatalf("podHosts = %v, want %v", got, c.want)
			}
		})
	}
}

// TestLockKeys: a StatefulSet's pods are one key, also when another set
// names one of them in hosts.
func TestLockKeys(t *testing.T) {
	set := func(spec v1.PostgresSpec) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team"}, Spec: v1.CredentialSetSpec{Postgres: &spec}}
	}
	sts := lockKeys(set(v1.PostgresSpec{StatefulSets: []v1.PostgresStatefulSet{{Name: "pg"}}}))
	host := lockKeys(set(v1.PostgresSpec{Hosts: []string{"PG-1.pg-hl.team.svc.cluster.local:5432"}}))
	plain := lockKeys(set(v1.PostgresSpec{Hosts: []string{"DB.example.org:5432"}}))
	if !slices.Equal(sts, []string{"postgres:statefulset/team/pg"}) || !slices.Equal(host, sts) {
		t.Fatalf("StatefulSet %v and its pod as a host %v must share one key", sts, host)
	}
	if !slices.Equal(plain, []string{"postgres:db.example.org:5432"}) {
		t.Fatalf("a host's key is %v", plain)
	}
}
