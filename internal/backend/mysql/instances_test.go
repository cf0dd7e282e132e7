package mysql

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestStatefulSetInstances(t *testing.T) {
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "moco-db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3)), ServiceName: "moco-db-headless"}}
	got := StatefulSetInstances(sts, v1.StatefulSetInstances{Name: "moco-db"})
	want := []string{"moco-db-0.moco-db-headless.shop.svc:3306", "moco-db-1.moco-db-headless.shop.svc:3306", "moco-db-2.moco-db-headless.shop.svc:3306"}
	if len(got) != 3 || got[0].Name != "moco-db-0" {
		t.Fatalf("got %+v", got)
	}
	for i, w := range want {
		if got[i].Addr != w {
			t.Errorf("instance %d = %s, want %s", i, got[i].Addr, w)
		}
	}
	got = StatefulSetInstances(sts, v1.StatefulSetInstances{Name: "moco-db", ServiceName: "other", Port: 3307})
	if got[1].Addr != "moco-db-1.other.shop.svc:3307" {
		t.Errorf("explicit service and port ignored: %s", got[1].Addr)
	}
	sts.Spec.Replicas = ptr.To(int32(0))
	if got := StatefulSetInstances(sts, v1.StatefulSetInstances{Name: "moco-db"}); len(got) != 0 {
		t.Errorf("replicas 0 gave %d instances", len(got))
	}
}
