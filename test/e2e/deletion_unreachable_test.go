package e2e

import (
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// A set in a namespace being deleted must not hold the namespace in
// Terminating forever: past the manager's namespace deletion timeout it
// lets go of what still holds its wind-down, and a DeletionIncomplete
// Warning in the operator's namespace (where the API server still takes
// Events) names what was left valid.

const unreachableTimeout = 8 * time.Second

// TestDeletionUnreachableBackend on a real MySQL cluster and API server.
func TestDeletionUnreachableBackend(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	prepareAdmin(t, c.Instances(), "ops-admin", "ops-admin-password-for-tests")
	startManager(t, cp.Config, func(r *controller.Reconciler) { r.NamespaceDeletionTimeout = unreachableTimeout })
	t.Run("ServersDown", func(t *testing.T) { deletionServersDown(t, c) })
	t.Run("ConsumerGroupLeft", func(t *testing.T) { deletionConsumerGroupLeft(t, c) })
}

// deletionServersDown: a set deleted while Distributed, with its
// namespace, while no instance answers. It lets go no sooner than the
// timeout and within the timeout and the retry back-off (5 min at most;
// here the first retries, seconds), changing nothing: once the servers
// are back, both passwords log in, as the Warning says, and the source
// Secret still holds them.
func deletionServersDown(t *testing.T, c *testenv.MySQLCluster) {
	ns := newNamespace(t)
	keys := map[string]string{"STRANDED_PASSWORD": "stranded"}
	cs := preparedAdminSet(t, ns, "stranded", c)
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "stranded", v1.PhaseIdle, 1)
	gen1 := userPasswords(sourceData(t, cs), keys, "")
	rotate(t, ns, "stranded", "stranded-1")
	cs = waitPhase(t, ns, "stranded", v1.PhaseDistributed, 1)
	gen2 := userPasswords(sourceData(t, cs), keys, engine.PendingSuffix)

	for _, i := range c.Instances() {
		i.Stop()
	}
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		for _, i := range c.Instances() {
			if err := i.Start(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(restart)
	began := time.Now()
	terminateNamespace(t, ns)
	if err := k8s.Delete(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitSetGone(t, ns, "stranded")
	took := time.Since(began)
	t.Logf("a set whose servers are all down let go %s after its namespace's deletion (timeout %s)", took.Round(100*time.Millisecond), unreachableTimeout)
	if took < unreachableTimeout {
		t.Fatalf("the set let go %s after its namespace's deletion, before the %s timeout", took, unreachableTimeout)
	}
	src := naming.SourceSecretName(cs)
	mustContain(t, "DeletionIncomplete", waitEvent(t, OperatorNamespace, src, string(reason.DeletionIncomplete)),
		ns+"/stranded", "namespace is being deleted", "rotation stranded-1 was in flight", "MySQL users stranded",
		"both the old and the new", "source Secret keeps", "unreachable")

	restart()
	loginMatrix(t, "let go with its servers down: both passwords, as the Warning says", c.Instances(), gen1, nil)
	loginMatrix(t, "let go with its servers down: both passwords, as the Warning says", c.Instances(), gen2, nil)
	if got := userPasswords(secretData(t, OperatorNamespace, src), keys, engine.PendingSuffix); !equalMaps(got, gen2) {
		t.Fatal("the source Secret must keep the credentials the backend still accepts")
	}
}

// deletionConsumerGroupLeft: a set with deletionPolicy Delete waits for
// its declared consumers, and a consumer group only stops when it is
// removed from the spec, which nobody does in a namespace being deleted.
// Past the timeout the set winds down as Discard: its user keeps the
// current password (the group may still use it), loses rekey's mark, and
// the source Secret is emptied.
func deletionConsumerGroupLeft(t *testing.T, c *testenv.MySQLCluster) {
	ns := newNamespace(t)
	keys := map[string]string{"FLEET_PASSWORD": "fleet"}
	cs := preparedAdminSet(t, ns, "fleet", c)
	cs.Spec.DeletionPolicy = v1.DeletionDelete
	cs.Spec.ConsumerGroups = []v1.ConsumerGroup{{Name: "nodes", Members: []string{"node-a", "node-b"}}}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "fleet", v1.PhaseIdle, 1)
	gen1 := userPasswords(sourceData(t, cs), keys, "")

	began := time.Now()
	terminateNamespace(t, ns)
	if err := k8s.Delete(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitSetGone(t, ns, "fleet")
	took := time.Since(began)
	t.Logf("a Delete set whose consumer group stayed wound down as Discard %s after its namespace's deletion (timeout %s)", took.Round(100*time.Millisecond), unreachableTimeout)
	if took < unreachableTimeout {
		t.Fatalf("the set let go %s after its namespace's deletion, before the %s timeout", took, unreachableTimeout)
	}
	src := naming.SourceSecretName(cs)
	mustContain(t, "DeletionIncomplete", waitEvent(t, OperatorNamespace, src, string(reason.DeletionIncomplete)),
		ns+"/fleet", "group nodes", "as with deletionPolicy Discard instead of Delete")
	loginMatrix(t, "a Delete set whose consumer group stayed, wound down as Discard", c.Instances(), gen1, nil)
	for _, i := range c.Instances() {
		marks, err := i.QueryString("SELECT COUNT(*) FROM INFORMATION_SCHEMA.USER_ATTRIBUTES WHERE USER='fleet' AND ATTRIBUTE LIKE '%rekey.io/set%'")
		if err != nil {
			t.Fatal(err)
		}
		if marks != "0" {
			t.Fatalf("%s: the user keeps rekey's mark", i.Name)
		}
	}
	if left := secretData(t, OperatorNamespace, src); len(left) != 0 {
		t.Fatalf("the source Secret keeps %d keys after the wind-down", len(left))
	}
}
