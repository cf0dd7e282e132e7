package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

func consumerNamespace(cs *v1.CredentialSet, c v1.ConsumerRef) string {
	if c.Namespace != "" {
		return c.Namespace
	}
	return cs.Namespace
}

// ConsumerIndexKey identifies a workload in the consumer index.
func ConsumerIndexKey(kind v1.ConsumerKind, namespace, name string) string {
	return string(kind) + "/" + namespace + "/" + name
}

func newWorkload(kind v1.ConsumerKind) client.Object {
	switch kind {
	case v1.KindStatefulSet:
		return &appsv1.StatefulSet{}
	case v1.KindDeployment:
		return &appsv1.Deployment{}
	case v1.KindCronJob:
		return &batchv1.CronJob{}
	default:
		return &appsv1.DaemonSet{}
	}
}

func templateAnnotations(obj client.Object) map[string]string {
	switch w := obj.(type) {
	case *appsv1.StatefulSet:
		return w.Spec.Template.Annotations
	case *appsv1.Deployment:
		return w.Spec.Template.Annotations
	case *appsv1.DaemonSet:
		return w.Spec.Template.Annotations
	case *batchv1.CronJob:
		return w.Spec.JobTemplate.Spec.Template.Annotations
	}
	return nil
}

func rolloutOf(obj client.Object) engine.RolloutState {
	switch w := obj.(type) {
	case *appsv1.StatefulSet:
		return engine.StatefulSetRollout(w)
	case *appsv1.Deployment:
		return engine.DeploymentRollout(w)
	case *appsv1.DaemonSet:
		return engine.DaemonSetRollout(w)
	}
	return engine.RolloutState{Message: "unsupported kind"}
}

// rollout is how far obj has rolled out. A StatefulSet whose partition
// another operator lowers on purpose, one pod at a time while the cluster
// it serves is healthy (a registry.Pacer: MOCO), is judged by
// pacedRollout: its partition is that operator's health gate at work,
// not a stall. Only such a rollout costs a read of the owner. recheck >
// 0: the judgement turns by time alone after that long, with nothing
// watched changing.
func (r *Reconciler) rollout(ctx context.Context, cs *v1.CredentialSet, obj client.Object) (ro engine.RolloutState, recheck time.Duration) {
	if cj, ok := obj.(*batchv1.CronJob); ok {
		return r.cronJobRollout(ctx, cs, cj)
	}
	ro = rolloutOf(obj)
	sts, ok := obj.(*appsv1.StatefulSet)
	if !ok || ro.Done || partitionOf(sts) == 0 {
		return ro, 0
	}
	p, kind, owner, paced := registry.PacerOf(sts)
	if !paced {
		return ro, 0
	}
	reader := client.Reader(r.Client)
	if r.APIReader != nil {
		reader = r.APIReader
	}
	g := pacing{Pacer: p, kind: kind, owner: owner, health: p.Health(ctx, reader, sts.Namespace, owner)}
	return pacedRollout(sts, ro, g, r.now(), r.stuckAfter(cs))
}

// pacing is who paces a StatefulSet's rollout: the operator, the owner
// whose health gates it, and that health as last read.
type pacing struct {
	registry.Pacer
	kind, owner string
	health      registry.OwnerHealth
}

func partitionOf(sts *appsv1.StatefulSet) int32 {
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		return ptr.Deref(ru.Partition, 0)
	}
	return 0
}

// pacedRollout judges the rollout of sts, whose partition the operator
// g names lowers one pod at a time while the owner is healthy (ro: the
// rollout as for any StatefulSet). While it paces it, rekey waits and
// reports progress, never RolloutStuck, and never advises lowering the
// partition: that would restart pods past the operator's health gate. An
// owner unhealthy for longer than stuckAfter (0: never) holds the rollout
// for good until a person heals it: that is reported as stuck, with
// advice that keeps the gate; recheck is how long until a held rollout
// counts as stuck.
func pacedRollout(sts *appsv1.StatefulSet, ro engine.RolloutState, g pacing, now time.Time, stuckAfter time.Duration) (_ engine.RolloutState, recheck time.Duration) {
	p := partitionOf(sts)
	if ro.Done || p == 0 {
		return ro, 0
	}
	want := ptr.Deref(sts.Spec.Replicas, 1)
	progress := fmt.Sprintf("%d of %d pods restarted, paced by %s (partition %d): %s's partition controller restarts one pod at a time while %s %s/%s is %s",
		sts.Status.UpdatedReplicas, want, g.Name, p, g.Name, g.kind, sts.Namespace, g.owner, g.Condition)
	h := g.health
	if !h.Known || h.Healthy {
		return engine.RolloutState{Message: progress + "; rekey waits for it"}, 0
	}
	held := fmt.Sprintf("%s; %s holds it while the cluster is %s=False (reason %s) since %s",
		progress, g.Name, g.Condition, h.Reason, h.Since.UTC().Format(time.RFC3339))
	resumes := fmt.Sprintf(", and resumes by itself once it is %s again", g.Condition)
	if stuckAfter <= 0 {
		return engine.RolloutState{Message: held + resumes}, 0
	}
	if left := h.Since.Add(stuckAfter).Sub(now); left > 0 {
		return engine.RolloutState{Message: held + resumes}, left
	}
	return engine.RolloutState{Stuck: true, Message: fmt.Sprintf(
		"%s, longer than rotation.stuckAfter %s: find why %s reports the cluster unhealthy (%s) and repair it; %s then resumes the rollout and rekey finishes by itself. Do not lower the partition by hand: that restarts pods past %s's health gate",
		held, stuckAfter, g.Name, g.Diagnose, g.Name, g.Name)}, 0
}

// syncConsumers puts the restart annotation value on every consumer's pod
// template and reports whether each has rolled it out. The value is stable
// across Distributed → Idle, so completion never causes a second restart.
// The coverage measured is recorded in t's observation.
func (r *Reconciler) syncConsumers(ctx context.Context, t *turn) (bool, error) {
	cs, known := t.cs, t.known()
	hash := secretHash(cs, r.servedGeneration(cs))
	want := engine.RestartValue(cs.Status)
	key := naming.RestartAnnotation(cs)
	all := true
	var out []v1.ConsumerStatus
	for _, c := range cs.Spec.Consumers {
		ns := consumerNamespace(cs, c)
		st := v1.ConsumerStatus{Kind: c.Kind, Namespace: ns, Name: c.Name}
		obj := newWorkload(c.Kind)
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name}, obj)
		switch {
		case apierrors.IsNotFound(err) && !cs.DeletionTimestamp.IsZero():
			// A consumer deleted with its set holds nothing any more: the
			// rotation in flight must not wait for it to roll out.
			st.RolledOut, st.Message = true, fmt.Sprintf("%s %s/%s is gone (the set is being deleted)", c.Kind, ns, c.Name)
		case apierrors.IsNotFound(err):
			st.Message = fmt.Sprintf("%s %s/%s not found", c.Kind, ns, c.Name)
		case err != nil:
			return false, err
		case want != "" && templateAnnotations(obj)[key] != want && t.unserved:
			st.Message = "restart held until the distribution Secrets hold the credentials it is for"
		case want != "" && templateAnnotations(obj)[key] != want:
			if err := r.patchTemplate(ctx, obj, key, want); err != nil {
				return false, fmt.Errorf("restart %s %s/%s: %w", c.Kind, ns, c.Name, err)
			}
			r.event(cs, "Normal", reason.ConsumerRestarted, "Restart", restartWords(c.Kind), c.Kind, ns, c.Name)
			st.Message = "restart requested"
		default:
			ro, recheck := r.rollout(ctx, cs, obj)
			t.obs.recheckWithin(recheck)
			st.RolledOut, st.Message, st.Stuck = ro.Done, ro.Message, ro.Stuck
		}
		r.noteMoved(cs, known.Consumers, &st, hash)
		all = all && st.RolledOut
		out = append(out, st)
	}
	groups := r.syncGroups(ctx, cs, known, hash)
	for _, g := range groups {
		all = all && g.RolledOut
	}
	t.obs.setConsumers(append(out, groups...))
	return all, nil
}

// syncCoverage notes what the distribution Secrets hold, then refreshes
// every consumer's status (workloads and groups) and says whether all
// moved to it.
func (r *Reconciler) syncCoverage(ctx context.Context, t *turn) (bool, error) {
	r.noteHash(t)
	return r.syncConsumers(ctx, t)
}

func (r *Reconciler) patchTemplate(ctx context.Context, obj client.Object, key, value string) error {
	return r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, templatePatch(obj, key, value)))
}

// templatePatch is the merge patch that sets annotation key on obj's pod
// template (a CronJob's: its job template's).
func templatePatch(obj client.Object, key, value string) []byte {
	tmpl := map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}}
	spec := map[string]any{"template": tmpl}
	if _, ok := obj.(*batchv1.CronJob); ok {
		spec = map[string]any{"jobTemplate": map[string]any{"spec": spec}}
	}
	body, _ := json.Marshal(map[string]any{"spec": spec})
	return body
}

func countRolledOut(cs []v1.ConsumerStatus) string {
	n := 0
	for _, c := range cs {
		if c.RolledOut {
			n++
		}
	}
	return fmt.Sprintf("%d/%d", n, len(cs))
}

// stuckRollout is the problem of a consumer whose rollout will not finish
// by itself while rekey waits for it (discard, or the reset of a
// rollback): rekey keeps waiting, and says what a person must do.
func stuckRollout(st v1.CredentialSetStatus) *problem {
	waiting := st.Phase == v1.PhaseDistributed && !st.DiscardApplied || st.ResetPending
	if !waiting {
		return nil
	}
	var stuck []string
	for _, c := range st.Consumers {
		if c.Stuck && !c.RolledOut {
			stuck = append(stuck, fmt.Sprintf("%s %s/%s: %s", c.Kind, c.Namespace, c.Name, c.Message))
		}
	}
	if len(stuck) == 0 {
		return nil
	}
	return &problem{reason.RolloutStuck, fmt.Sprintf(
		"the rollout of %s will not finish by itself, so rekey keeps the old credentials valid and waits: %s", plural(len(stuck), "consumer"), strings.Join(stuck, "; "))}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
