package controller

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
)

// mocoWords is the pacer's words as MOCO registers them
// (internal/backend/mocokube, which the controller's tests do not link).
var mocoWords = registry.Pacer{Name: "MOCO", Condition: "Healthy",
	Diagnose: "kubectl moco status, the MySQLCluster's conditions, the pods that are not ready"}

func TestPacedRollout(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	// MOCO's StatefulSet mid-rollout: its webhook set the partition to 3
	// on rekey's restart, its partition controller lowered it to 1, and
	// pods 1 and 2 run the new template.
	sts := func(partition, updated int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "moco-db", Generation: 4},
			Spec: appsv1.StatefulSetSpec{Replicas: new(int32(3)), UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: new(partition)}}},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 4, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: updated,
				CurrentRevision: "old", UpdateRevision: "new"},
		}
	}
	midway := sts(1, 2)
	if ro := engine.StatefulSetRollout(midway); !ro.Stuck {
		t.Fatalf("the plain StatefulSet judgement no longer calls a partition stuck (%+v): this table tests nothing", ro)
	}
	healthy := registry.OwnerHealth{Known: true, Healthy: true, Reason: "Healthy", Since: now.Add(-time.Hour)}
	sick := func(ago time.Duration) registry.OwnerHealth {
		return registry.OwnerHealth{Known: true, Reason: "Degraded", Since: now.Add(-ago)}
	}
	done := sts(0, 3)
	done.Status.CurrentRevision = "new"
	for _, tc := range []struct {
		name       string
		sts        *appsv1.StatefulSet
		h          registry.OwnerHealth
		stuckAfter time.Duration
		stuck      bool
		done       bool
		recheck    time.Duration
		says       []string
	}{
		{name: "healthy, MOCO lowering the partition: progress, no stall", sts: midway, h: healthy, stuckAfter: 10 * time.Minute,
			says: []string{"2 of 3 pods restarted, paced by MOCO (partition 1)", "MySQLCluster shop/db", "rekey waits"}},
		{name: "just partitioned by MOCO's webhook", sts: sts(3, 0), h: healthy, stuckAfter: 10 * time.Minute,
			says: []string{"0 of 3 pods restarted, paced by MOCO (partition 3)"}},
		{name: "cluster not readable: waits, cannot judge a stall", sts: midway, h: registry.OwnerHealth{}, stuckAfter: time.Minute,
			says: []string{"paced by MOCO"}},
		{name: "unhealthy for less than stuckAfter: MOCO holds, rekey waits and looks again when it would be stuck", sts: midway, h: sick(5 * time.Minute), stuckAfter: 10 * time.Minute,
			recheck: 5 * time.Minute,
			says:    []string{"Healthy=False (reason Degraded) since 2026-05-01T11:55:00Z", "resumes by itself"}},
		{name: "unhealthy longer than stuckAfter: a stall, advice keeps MOCO's gate", sts: midway, h: sick(11 * time.Minute), stuckAfter: 10 * time.Minute,
			stuck: true, says: []string{"longer than rotation.stuckAfter 10m0s", "kubectl moco status", "Do not lower the partition by hand"}},
		{name: "unhealthy exactly stuckAfter", sts: midway, h: sick(10 * time.Minute), stuckAfter: 10 * time.Minute, stuck: true},
		{name: "stuckAfter 0 turns the stall signal off", sts: midway, h: sick(24 * time.Hour), stuckAfter: 0,
			says: []string{"resumes by itself"}},
		{name: "partition 0: MOCO is done, the StatefulSet controller finishes", sts: sts(0, 2), h: sick(time.Hour), stuckAfter: time.Minute,
			says: []string{"pods are moving to revision new"}},
		{name: "rolled out", sts: done, h: sick(time.Hour), stuckAfter: time.Minute, done: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := pacing{Pacer: mocoWords, kind: "MySQLCluster", owner: "db", health: tc.h}
			got, recheck := pacedRollout(tc.sts, engine.StatefulSetRollout(tc.sts), g, now, tc.stuckAfter)
			if got.Stuck != tc.stuck || got.Done != tc.done || recheck != tc.recheck {
				t.Fatalf("stuck %v done %v recheck %s, want stuck %v done %v recheck %s: %s", got.Stuck, got.Done, recheck, tc.stuck, tc.done, tc.recheck, got.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(got.Message, s) {
					t.Errorf("message lacks %q: %s", s, got.Message)
				}
			}
			if strings.Contains(got.Message, "lower the partition to 0") {
				t.Errorf("advises bypassing MOCO's health gate: %s", got.Message)
			}
		})
	}
}
