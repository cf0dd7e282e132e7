package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/testenv"
)

var nsSeq struct {
	sync.Mutex
	n int
}

// newNamespace creates a namespace for one test; its CredentialSets are
// deleted when the test ends.
func newNamespace(t testing.TB) string {
	t.Helper()
	nsSeq.Lock()
	nsSeq.n++
	name := fmt.Sprintf("t%d-%d", time.Now().Unix()%100000, nsSeq.n)
	nsSeq.Unlock()
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	deleteSetsAtEnd(t, k8s, cp.Config.Host, name)
	return name
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or the timeout passes; what it
// waited for becomes part of the running matrix scenario's outcome.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	waitFor(t, timeout, what, cond)
	observed(t, "%s", what)
}

// waitFor is eventually without the observation, for helpers that note a
// shorter one themselves.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	state := ""
	for time.Now().Before(deadline) {
		var ok bool
		if ok, state = cond(); ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s (last state: %s)", timeout, what, state)
}

func getSet(t testing.TB, ns, name string) *v1.CredentialSet {
	t.Helper()
	cs := &v1.CredentialSet{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

func stateOf(cs *v1.CredentialSet) string {
	return fmt.Sprintf("phase=%s rotation=%q applied=%v/%v gen=%d last=%q conditions=%v",
		cs.Status.Phase, cs.Status.RotationID, cs.Status.RotateApplied, cs.Status.DiscardApplied,
		cs.Status.KeyGeneration, cs.Status.LastRotationID, condSummary(cs))
}

func condSummary(cs *v1.CredentialSet) string {
	var parts []string
	for _, c := range cs.Status.Conditions {
		parts = append(parts, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	return strings.Join(parts, ",")
}

// waitPhase waits for phase and generation.
func waitPhase(t testing.TB, ns, name string, phase v1.RotationPhase, gen int64) *v1.CredentialSet {
	t.Helper()
	// A hang guard, not a speed goal: a Ceph admin key rotation recovered
	// after a kill took just over 2 minutes at load 30-46 on two cores.
	return waitPhaseWithin(t, 5*time.Minute, ns, name, phase, gen)
}

// waitPhaseWithin is waitPhase with the hang guard of a wait that includes
// a slow rollout (MOCO's, one pod at a time, each after the cluster is
// Healthy again).
func waitPhaseWithin(t testing.TB, guard time.Duration, ns, name string, phase v1.RotationPhase, gen int64) *v1.CredentialSet {
	t.Helper()
	var cs *v1.CredentialSet
	waitFor(t, guard, fmt.Sprintf("%s/%s phase %s generation %d", ns, name, phase, gen), func() (bool, string) {
		cs = getSet(t, ns, name)
		return cs.Status.Phase == phase && cs.Status.KeyGeneration == gen, stateOf(cs)
	})
	observed(t, "%s %s at generation %d", name, phase, gen)
	return cs
}

func annotate(t testing.TB, ns, name, key, value string) {
	t.Helper()
	cs := getSet(t, ns, name)
	patch := client.MergeFrom(cs.DeepCopy())
	if cs.Annotations == nil {
		cs.Annotations = map[string]string{}
	}
	cs.Annotations[key] = value
	if err := k8s.Patch(context.Background(), cs, patch); err != nil {
		t.Fatal(err)
	}
}

func rotate(t testing.TB, ns, name, id string) { annotate(t, ns, name, engine.RotateAnnotation, id) }
func discard(t testing.TB, ns, name, id string) {
	annotate(t, ns, name, engine.DiscardAnnotation, id)
}

func secretData(t testing.TB, ns, name string) map[string][]byte {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s.Data
}

func sourceData(t testing.TB, cs *v1.CredentialSet) map[string][]byte {
	return secretData(t, OperatorNamespace, naming.SourceSecretName(cs))
}

// waitEvent waits for an Event with reason about the set and returns its note.
func waitEvent(t testing.TB, ns, name, why string) string {
	t.Helper()
	note := ""
	waitFor(t, time.Minute, "event "+why+" on "+name, func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == why {
				note = e.Note
				return true, ""
			}
			seen = append(seen, e.Reason)
		}
		return false, strings.Join(seen, ",")
	})
	observed(t, "event %s", why)
	return note
}

func condition(cs *v1.CredentialSet, typ string) *metav1.Condition {
	for i := range cs.Status.Conditions {
		if cs.Status.Conditions[i].Type == typ {
			return &cs.Status.Conditions[i]
		}
	}
	return nil
}

// onEachInstance runs statements directly on each instance, unlogged and
// with super_read_only lifted around them, as a cluster manager (MOCO's
// agent) would.
func onEachInstance(t testing.TB, insts []*testenv.MySQLInstance, stmts ...string) {
	t.Helper()
	for _, i := range insts {
		all := append([]string{"SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF"}, stmts...)
		if i.Role != testenv.RolePrimary {
			all = append(all, "SET GLOBAL super_read_only=ON")
		}
		// rekey may be restoring super_read_only on this replica at the
		// same moment (a refused rotation is retried): like any agent
		// sharing the instance, try again.
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			if err = i.Exec(all...); err == nil || !strings.Contains(err.Error(), "super-read-only") {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// prepareAdmin creates an administrator account on each instance before
// rekey is told about it.
func prepareAdmin(t testing.TB, insts []*testenv.MySQLInstance, user, password string) {
	t.Helper()
	onEachInstance(t, insts, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, password),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO '%s'@'%%' WITH GRANT OPTION", user))
}

func createSecret(t testing.TB, ns, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// updateSpec changes a set's spec from a fresh read, again on a conflict:
// the operator writes the same object (status, finalizers, annotations).
func updateSpec(t testing.TB, ns, name string, edit func(*v1.CredentialSet)) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		cs := getSet(t, ns, name)
		edit(cs)
		err := k8s.Update(context.Background(), cs)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || attempt == 9 {
			t.Fatal(err)
		}
	}
}
