package e2e

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/naming"
)

// run is one pod's process: read the Secret once, then log in on every tick.
func (pc *podConsumers) run(sp *simPod, secret string) {
	defer pc.wg.Done()
	var s corev1.Secret
	for {
		// The container cannot start before its envFrom Secret exists
		// (CreateContainerConfigError); the kubelet retries.
		err := pc.c.Get(context.Background(), client.ObjectKey{Namespace: pc.ns, Name: secret}, &s)
		if err == nil {
			break
		}
		select {
		case <-sp.stop:
			return
		case <-time.After(consumerLoginEvery):
		}
	}
	creds := pc.way.logins(s.Data)
	if len(creds) == 0 {
		pc.t.Errorf("consumer pod %s: Secret %s holds no login", sp.name, secret)
		return
	}
	sp.generation, sp.hash = s.Annotations[naming.GenerationAnnotation], s.Annotations[naming.SecretHashAnnotation]
	pc.starts.Add(1)
	pc.t.Logf("consumer pod %s started: read Secret %s at generation %s (secret-hash %s)", sp.name, secret, sp.generation, sp.hash)

	tick := time.NewTicker(pc.way.interval())
	defer tick.Stop()
	for turn := 0; ; turn++ {
		select {
		case <-sp.stop:
			return
		case <-tick.C:
		}
		for n, inst := range pc.way.targets() {
			// Checked before every login: when a round is slower than a
			// tick, select above would pick the pending tick over the stop
			// half of the time, and a pod told to stop would go on.
			if stopped(sp) {
				return
			}
			l := creds[(turn+n)%len(creds)]
			began := time.Now()
			err := inst.login(l.user, l.password)
			if pc.way.refused(err) && pc.terminatedBy(sp, began) {
				return
			}
			pc.record(sp, l.user, inst.name, err)
		}
	}
}

func stopped(sp *simPod) bool {
	select {
	case <-sp.stop:
		return true
	default:
		return false
	}
}

// terminatedBy says whether the pod had been told to stop (its deletion
// requested: SIGTERM) before a login that began at began. The informer can
// tell the pod late on a loaded machine; before a refusal is counted, the
// API server is asked. A pod already gone entirely was deleted: kwok
// removes a pod only after its deletion was requested, which takes far
// longer than the moment between the refused login and this check. Such a
// refusal is logged and counted apart (refusedTerminating), not as a
// lockout, and the pod's process ends.
func (pc *podConsumers) terminatedBy(sp *simPod, began time.Time) bool {
	p := &corev1.Pod{}
	err := pc.c.Get(context.Background(), client.ObjectKey{Namespace: pc.ns, Name: sp.name}, p)
	var sigterm time.Time
	switch {
	case apierrors.IsNotFound(err):
		sigterm = time.Time{} // deleted: requested before now
	case err != nil || p.DeletionTimestamp == nil:
		return false
	default:
		sigterm = p.DeletionTimestamp.Add(-time.Duration(ptr.Deref(p.DeletionGracePeriodSeconds, 0)) * time.Second)
		if sigterm.After(began) {
			return false // deleted after the refused login began: it was running
		}
	}
	pc.refusedTerminating.Add(1)
	pc.t.Logf("consumer pod %s: a login refused after the pod's deletion was requested (%s): not a lockout, the process ends",
		sp.name, deletionTime(sigterm))
	closeOnce(sp.stop)
	return true
}

func deletionTime(t time.Time) string {
	if t.IsZero() {
		return "the pod is already gone"
	}
	return "at " + t.Format("15:04:05")
}

func (pc *podConsumers) record(sp *simPod, user, inst string, err error) {
	switch {
	case err == nil:
		pc.attempts.Add(1)
	case pc.way.refused(err):
		pc.attempts.Add(1)
		pc.refused.Add(1)
		pc.mu.Lock()
		if len(pc.refusals) < consumerKeptRefusals {
			pc.refusals = append(pc.refusals, consumerRefusal{At: time.Now(), Deployment: pc.name, Pod: sp.name, User: user,
				Instance: inst, Generation: sp.generation, SecretHash: sp.hash, Error: err.Error()})
		}
		pc.mu.Unlock()
	default:
		pc.unanswered.Add(1) // stopped, starting, being rebuilt: not a login
	}
}

func refusalLines(rs []consumerRefusal) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString("  " + r.String() + "\n")
	}
	return b.String()
}
