package moco

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPacedBy(t *testing.T) {
	mocoSts := func(edit func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
		p := int32(3)
		s := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "moco-shop",
				Labels:          map[string]string{LabelName: AppNameMySQL, LabelInstance: "shop", LabelCreatedBy: CreatedBy},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: APIVersion, Kind: Kind, Name: "shop", Controller: new(true)}}},
			Spec: appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &p}}},
		}
		if edit != nil {
			edit(s)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		sts  *appsv1.StatefulSet
		want string
	}{
		{"MOCO's StatefulSet with the webhook's partition", mocoSts(nil), "shop"},
		{"a second owner: the webhook leaves it alone", mocoSts(func(s *appsv1.StatefulSet) {
			s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x"})
		}), ""},
		{"no owner", mocoSts(func(s *appsv1.StatefulSet) { s.OwnerReferences = nil }), ""},
		{"owned by another operator's MySQLCluster", mocoSts(func(s *appsv1.StatefulSet) { s.OwnerReferences[0].APIVersion = "mysql.example.com/v1" }), ""},
		{"owned by another kind of MOCO's group", mocoSts(func(s *appsv1.StatefulSet) { s.OwnerReferences[0].Kind = "BackupPolicy" }), ""},
		{"no created-by label: MOCO's partition controller ignores it", mocoSts(func(s *appsv1.StatefulSet) { delete(s.Labels, LabelCreatedBy) }), ""},
		{"another app name label", mocoSts(func(s *appsv1.StatefulSet) { s.Labels[LabelName] = "mysql-backup" }), ""},
		{"force-rolling-update: MOCO does not pace", mocoSts(func(s *appsv1.StatefulSet) {
			s.Annotations = map[string]string{ForceRollingUpdateAnnotation: "true"}
		}), ""},
		{"force-rolling-update other than true is ignored by MOCO", mocoSts(func(s *appsv1.StatefulSet) {
			s.Annotations = map[string]string{ForceRollingUpdateAnnotation: "false"}
		}), "shop"},
		{"no partition: nothing to pace", mocoSts(func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate = nil }), ""},
		{"partition 0 still counts (MOCO lowered it all the way)", mocoSts(func(s *appsv1.StatefulSet) {
			z := int32(0)
			s.Spec.UpdateStrategy.RollingUpdate.Partition = &z
		}), "shop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PacedBy(tc.sts); got != tc.want {
				t.Fatalf("PacedBy = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHealthyCondition(t *testing.T) {
	conds := []metav1.Condition{{Type: CondAvailable, Status: metav1.ConditionTrue}, {Type: CondHealthy, Status: metav1.ConditionFalse, Reason: "Degraded"}}
	if c := HealthyCondition(conds); c == nil || c.Reason != "Degraded" {
		t.Fatalf("HealthyCondition = %+v", c)
	}
	if c := HealthyCondition(conds[:1]); c != nil {
		t.Fatalf("HealthyCondition without one = %+v", c)
	}
}
