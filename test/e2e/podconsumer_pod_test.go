package e2e

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/testenv"
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
	creds := map[string]string{}
	for _, k := range pc.keys {
		creds[k] = string(s.Data[k])
	}
	sp.generation, sp.hash = s.Annotations[naming.GenerationAnnotation], s.Annotations[naming.SecretHashAnnotation]
	pc.starts.Add(1)
	pc.t.Logf("consumer pod %s started: read Secret %s at generation %s (secret-hash %s)", sp.name, secret, sp.generation, sp.hash)

	tick := time.NewTicker(consumerLoginEvery)
	defer tick.Stop()
	for turn := 0; ; turn++ {
		select {
		case <-sp.stop:
			return
		case <-tick.C:
		}
		for n, inst := range pc.targets() {
			// Checked before every login: when a round is slower than a
			// tick, select above would pick the pending tick over the stop
			// half of the time, and a pod told to stop would go on.
			if stopped(sp) {
				return
			}
			k := pc.keys[(turn+n)%len(pc.keys)]
			began := time.Now()
			err := inst.CanLogin(pc.users[k], creds[k])
			if refusedLogin(err) && pc.terminatedBy(sp, began) {
				return
			}
			pc.record(sp, pc.users[k], inst, err)
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

func (pc *podConsumers) record(sp *simPod, user string, inst *testenv.MySQLInstance, err error) {
	switch {
	case err == nil:
		pc.attempts.Add(1)
	case refusedLogin(err):
		pc.attempts.Add(1)
		pc.refused.Add(1)
		pc.mu.Lock()
		if len(pc.refusals) < consumerKeptRefusals {
			pc.refusals = append(pc.refusals, consumerRefusal{At: time.Now(), Deployment: pc.name, Pod: sp.name, User: user,
				Instance: inst.Name, Generation: sp.generation, SecretHash: sp.hash, Error: err.Error()})
		}
		pc.mu.Unlock()
	default:
		pc.unanswered.Add(1) // stopped, starting, being rebuilt: not a login
	}
}

// refusedLogin: MySQL answered and would not let the account in — a wrong
// password (1045), a locked account (3118), an expired password (1862).
// MySQL's message names the account and host, never the password.
func refusedLogin(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1045, 3118, 1862:
		return true
	}
	return false
}

func refusalLines(rs []consumerRefusal) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString("  " + r.String() + "\n")
	}
	return b.String()
}
