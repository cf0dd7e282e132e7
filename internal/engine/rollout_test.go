package engine

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubectl/pkg/polymorphichelpers"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// kubectlSays is what `kubectl rollout status` reports for obj: done,
// or an error (a stuck rollout, or a strategy it does not follow).
func kubectlSays(t *testing.T, kind string, obj runtime.Object) (done bool, err error) {
	t.Helper()
	v, verr := polymorphichelpers.StatusViewerFor(schema.GroupKind{Group: "apps", Kind: kind})
	if verr != nil {
		t.Fatal(verr)
	}
	u, cerr := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if cerr != nil {
		t.Fatal(cerr)
	}
	_, done, err = v.Status(&unstructuredObj{u}, 0)
	return done, err
}

type unstructuredObj struct{ m map[string]any }

func (u *unstructuredObj) UnstructuredContent() map[string]any     { return u.m }
func (u *unstructuredObj) SetUnstructuredContent(m map[string]any) { u.m = m }
func (u *unstructuredObj) IsList() bool                            { return false }
func (u *unstructuredObj) EachListItem(func(runtime.Object) error) error {
	return nil
}
func (u *unstructuredObj) EachListItemWithAlloc(func(runtime.Object) error) error { return nil }
func (u *unstructuredObj) NewEmptyInstance() runtime.Unstructured                 { return &unstructuredObj{} }
func (u *unstructuredObj) GetObjectKind() schema.ObjectKind                       { return schema.EmptyObjectKind }
func (u *unstructuredObj) DeepCopyObject() runtime.Object                         { return u }

// agreement says how rekey's gate relates to kubectl on a case.
type agreement int

const (
	same       agreement = iota // rekey is done exactly when kubectl is
	stricter                    // kubectl says done; rekey waits (pods on the old template)
	stuckError                  // kubectl returns an error; rekey reports Stuck
)

func deployment(mutate func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: i32(3)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3,
			ReadyReplicas: 3, AvailableReplicas: 3},
	}
	mutate(d)
	return d
}

func statefulSet(mutate func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Generation: 2},
		Spec: appsv1.StatefulSetSpec{Replicas: i32(3),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 3,
			CurrentReplicas: 3, CurrentRevision: "db-2", UpdateRevision: "db-2"},
	}
	mutate(s)
	return s
}

func daemonSet(mutate func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	d := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Generation: 2},
		Spec:       appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 4, UpdatedNumberScheduled: 4,
			NumberReady: 4, NumberAvailable: 4},
	}
	mutate(d)
	return d
}

type gateCase struct {
	name  string
	kind  string
	obj   runtime.Object
	gate  func() RolloutState
	rel   agreement
	done  bool
	stuck bool
	msg   string
}

func TestRolloutGateFollowsKubectl(t *testing.T) {
	var cases []gateCase
	addD := func(name string, rel agreement, done, stuck bool, msg string, m func(*appsv1.Deployment)) {
		d := deployment(m)
		cases = append(cases, gateCase{"Deployment: " + name, "Deployment", d, func() RolloutState { return DeploymentRollout(d) }, rel, done, stuck, msg})
	}
	addS := func(name string, rel agreement, done, stuck bool, msg string, m func(*appsv1.StatefulSet)) {
		s := statefulSet(m)
		cases = append(cases, gateCase{"StatefulSet: " + name, "StatefulSet", s, func() RolloutState { return StatefulSetRollout(s) }, rel, done, stuck, msg})
	}
	addDS := func(name string, rel agreement, done, stuck bool, msg string, m func(*appsv1.DaemonSet)) {
		d := daemonSet(m)
		cases = append(cases, gateCase{"DaemonSet: " + name, "DaemonSet", d, func() RolloutState { return DaemonSetRollout(d) }, rel, done, stuck, msg})
	}

	addD("rolled out", same, true, false, "", func(*appsv1.Deployment) {})
	addD("spec not observed", same, false, false, "not observed", func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 1 })
	addD("replicas being updated", same, false, false, "1/3 replicas updated", func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 1 })
	addD("old replicas terminating", same, false, false, "2 old replicas", func(d *appsv1.Deployment) { d.Status.Replicas = 5 })
	addD("updated replicas not available", same, false, false, "2/3 updated replicas available", func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 2 })
	addD("old pods still terminating", stricter, false, false, "2 old pods still terminating", func(d *appsv1.Deployment) {
		d.Status.TerminatingReplicas = i32(2)
	})
	addD("progress deadline exceeded", stuckError, false, true, "exceeded its progress deadline", func(d *appsv1.Deployment) {
		d.Status.UpdatedReplicas = 1
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
			Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "api-7d9" has timed out progressing.`}}
	})
	// kubectl waits forever on a paused Deployment; rekey says why.
	addD("paused mid-rollout", same, false, true, "kubectl rollout resume deployment/api", func(d *appsv1.Deployment) {
		d.Spec.Paused = true
		d.Status.UpdatedReplicas = 0
	})
	addD("paused after it rolled out", same, true, false, "", func(d *appsv1.Deployment) { d.Spec.Paused = true })

	addS("rolled out", same, true, false, "", func(*appsv1.StatefulSet) {})
	addS("never observed", same, false, false, "not observed", func(s *appsv1.StatefulSet) { s.Status.ObservedGeneration = 0 })
	addS("pods not ready", same, false, false, "2/3 pods ready", func(s *appsv1.StatefulSet) { s.Status.ReadyReplicas = 2 })
	addS("pods moving to the update revision", same, false, false, "moving to revision db-3", func(s *appsv1.StatefulSet) {
		s.Status.UpdateRevision, s.Status.UpdatedReplicas = "db-3", 1
	})
	addS("partition keeps pods on the old template", stricter, false, true, "lower the partition to 0", func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: i32(2)}
		s.Status.UpdateRevision, s.Status.UpdatedReplicas = "db-3", 1
	})
	addS("partition 0 rolled out", same, true, false, "", func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: i32(0)}
	})
	addS("OnDelete with pods on the old template", stuckError, false, true, "kubectl delete pod", func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		s.Status.UpdateRevision, s.Status.UpdatedReplicas = "db-3", 0
	})
	// kubectl does not follow OnDelete at all; rekey is done once every pod
	// was deleted and came back on the new template.
	addS("OnDelete, every pod replaced", stuckError, true, false, "", func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	})

	addDS("rolled out", same, true, false, "", func(*appsv1.DaemonSet) {})
	addDS("spec not observed", same, false, false, "not observed", func(d *appsv1.DaemonSet) { d.Status.ObservedGeneration = 1 })
	addDS("pods being updated", same, false, false, "2/4 pods updated", func(d *appsv1.DaemonSet) { d.Status.UpdatedNumberScheduled = 2 })
	addDS("ready but not yet available", same, false, false, "3/4 pods available", func(d *appsv1.DaemonSet) { d.Status.NumberAvailable = 3 })
	addDS("OnDelete with pods on the old template", stuckError, false, true, "kubectl delete pod", func(d *appsv1.DaemonSet) {
		d.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
		d.Status.UpdatedNumberScheduled = 1
	})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.gate()
			if got.Done != c.done || got.Stuck != c.stuck || !strings.Contains(got.Message, c.msg) {
				t.Fatalf("gate = %+v, want done=%v stuck=%v and a message containing %q", got, c.done, c.stuck, c.msg)
			}
			kdone, kerr := kubectlSays(t, c.kind, c.obj)
			switch c.rel {
			case same:
				if kerr != nil || kdone != got.Done {
					t.Fatalf("kubectl rollout status says done=%v (err %v), rekey's gate %v", kdone, kerr, got.Done)
				}
			case stricter:
				if kerr != nil || !kdone || got.Done {
					t.Fatalf("expected kubectl done and rekey waiting; kubectl done=%v err=%v, rekey %+v", kdone, kerr, got)
				}
			case stuckError:
				if kerr == nil {
					t.Fatalf("expected kubectl to refuse or report a stuck rollout; it says done=%v", kdone)
				}
			}
		})
	}
}

func i32(n int32) *int32 { return &n }

func TestRotationStuck(t *testing.T) {
	now := metav1.Now()
	started := metav1.NewTime(now.Add(-90 * time.Minute))
	cases := []struct {
		name         string
		st           v1.CredentialSetStatus
		after        time.Duration
		stuck        bool
		active, left time.Duration
	}{
		{"idle is never stuck", v1.CredentialSetStatus{Phase: v1.PhaseIdle, RotationStartedAt: &started}, time.Hour, false, 0, 0},
		{"distributed beyond the limit", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationStartedAt: &started}, time.Hour, true, 90 * time.Minute, 0},
		{"rotating beyond the limit", v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationStartedAt: &started}, time.Hour, true, 90 * time.Minute, 0},
		{"distributed within the limit", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationStartedAt: &started}, 2 * time.Hour, false, 90 * time.Minute, 30 * time.Minute},
		{"exactly at the limit counts", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationStartedAt: &started}, 90 * time.Minute, true, 90 * time.Minute, 0},
		{"start unknown (status from an older rekey)", v1.CredentialSetStatus{Phase: v1.PhaseDistributed}, time.Hour, false, 0, 0},
	}
	for _, c := range cases {
		stuck, active, left := RotationStuck(c.st, now.Time, c.after)
		if stuck != c.stuck || active != c.active || left != c.left {
			t.Errorf("%s: RotationStuck = %v, %v, %v; want %v, %v, %v", c.name, stuck, active, left, c.stuck, c.active, c.left)
		}
	}
}

// TestRestartIDs: every transition that restarts the consumers gives them
// a value of its own, also when its ID was taken before (a restore from a
// backup forgets it) or its secrets were distributed again, as long as the
// source Secret changed in between (the API server versions every write);
// RestartFor recognises each as its transition's, and nothing else.
func TestRestartIDs(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(id, rv string) string
	}{{"distributed", DistributedRestartID}, {"rolled back", RollbackRestartID}, {"recovered", RecoverRestartID}} {
		first, again := c.make("r1", "10"), c.make("r1", "11")
		if first == again || first == c.make("r2", "10") {
			t.Errorf("%s: %q, %q, %q: want a value per ID and source Secret version", c.name, first, again, c.make("r2", "10"))
		}
		base := c.make("r1", "")
		if !RestartFor(first, base) || !RestartFor(base, base) || RestartFor(c.make("r2", "10"), base) || RestartFor(base+"-", base) {
			t.Errorf("%s: RestartFor does not tell %q apart from the values of others", c.name, base)
		}
	}
	if AdoptRestartID("10") == AdoptRestartID("11") {
		t.Error("read back twice: the same restart value")
	}
}
