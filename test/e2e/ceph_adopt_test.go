package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestCephInPlaceAdopt: the key of an InPlace set's entity is rotated
// outside rekey (a person's `ceph auth rotate`), on a real mon, with
// consumer pods that read their Secret at start; they are refused from
// then on, the person's doing. A rotation is refused (KeyMismatch), and so
// is a recover: it would restart the pods onto the key the mon refuses,
// and no reset brings that key back. Both name the way out, deleting the
// entity from the source Secret; done, rekey reads the mon's key back,
// serves it and restarts the pods onto it, then runs the recover and the
// rotation it held; a leftover pending key in the source Secret (what a
// manager whose cache lagged may write) does not stop it. Once the last rollout is done no pod login is refused.
// Before, the deleted key was reported lost (MissingRotationPending,
// "restore them from backup"), and the recover restarted the pods onto the
// refused key.
func TestCephInPlaceAdopt(t *testing.T) {
	const name, entity = "ad", "client.ad"
	c, ns, pc := cephSetWithPods(t, name, entity, v1.CephInPlace, v1.DiscardAfterRollout)
	handRotate(t, c, entity)
	key, err := c.Key(ctxT(t), entity)
	if err != nil {
		t.Fatal(err)
	}

	way := "delete " + entity + " from the source Secret"
	rotate(t, ns, name, "r1")
	mustContain(t, "the rotation's refusal", waitEventNoting(t, ns, name, reason.KeyMismatch, "not the one the source Secret holds"), way)
	annotate(t, ns, name, engine.RecoverAnnotation, "c1")
	mustContain(t, "the recover's refusal", waitEventNoting(t, ns, name, reason.KeyMismatch, "recover c1 waits"), way)
	if st := getSet(t, ns, name).Status; st.ResetPending || engine.RestartFor(st.RestartID, engine.RecoverRestartID("c1", "")) {
		t.Fatalf("the recover went ahead while the mon refuses the current key: resetPending %v, restartID %q", st.ResetPending, st.RestartID)
	}
	observed(t, "the rotation and the recover refused, naming the way out")

	// The person deletes the key while the source Secret also holds a
	// pending key of a rotation no status accounts for (a manager whose
	// cache lagged behind a restore from backup writes one): rekey reads
	// the key back all the same and drops the leftover.
	editSource(t, getSet(t, ns, name), func(data map[string][]byte) {
		delete(data, entity)
		data[engine.PendingKey(entity)] = []byte(ceph.Keyring{Entity: entity, Key: key}.String())
		data[engine.RotationIDKey] = []byte("r0")
	})
	mustContain(t, "the read back", waitEventNoting(t, ns, name, reason.Provisioned, "read back from the backend"), entity)
	// r1 is discarded after its rollout (AfterRollout): Idle, the pods
	// run what it served.
	waitFor(t, 3*time.Minute, "the recover and the rotation done", func() (bool, string) {
		cs := getSet(t, ns, name)
		st := cs.Status
		return st.LastRecoverID == "c1" && st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle && !st.ResetPending, stateOf(cs)
	})
	_, served := keyOf(t, secretData(t, ns, name+"-keys")[entity+".keyring"])
	now, err := c.Key(ctxT(t), entity)
	if err != nil {
		t.Fatal(err)
	}
	if served != now || now == key {
		t.Fatal("after the read back and r1 the consumers must be served the mon's key, a new one r1 minted")
	}
	assertNoRefusalsSince(t, pc)
}

// cephSetWithPods starts a manager and an Idle set of one entity on a mon,
// whose consumer pods read their Secret at start; none of their logins is
// refused yet. Refusals while a person's or rekey's own rotation has not
// restarted them are expected: each test checks the end.
func cephSetWithPods(t *testing.T, name, entity string, strategy v1.CephStrategy, policy v1.DiscardPolicy) (*testenv.Ceph, string, *podConsumers) {
	t.Helper()
	c := cephRolloutCluster(t)
	startManager(t, cp.Config, withCephWorkDir(c))
	ns := newNamespace(t)
	cs := cephSet(t, c, ns, name, strategy, v1.CephEntity{Name: entity, Caps: v1.CephCaps{Mon: "allow r"}})
	cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: policy}
	pc := deployConsumersWay(t, cs, cephWay(c, entity))
	pc.lockoutsExpected.Store(true)
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, name, v1.PhaseIdle, 1)
	assertNoRefusalsSince(t, pc)
	return c, ns, pc
}

// cephRolloutCluster is matrixCluster for Ceph: a mon beside the full
// control plane, whose Deployment controller rolls consumers out.
func cephRolloutCluster(t *testing.T) *testenv.Ceph {
	t.Helper()
	var c *testenv.Ceph
	rolloutPlane(t, "ceph-mon", func() { c = testenv.CephForTest(t) })
	return c
}

// errCephRefused: the mon answered and refused the pod's key.
var errCephRefused = errors.New("cephx authentication refused")

// cephWay: the Secret holds the entity's name and key (<entity>.name,
// <entity>.key), as a Ceph client reads its keyring; a login is a command
// run as that entity against the mon. Each runs the ceph CLI, so a pod
// logs in every second.
func cephWay(c *testenv.Ceph, entity string) consumerWay {
	return consumerWay{
		logins: func(data map[string][]byte) []consumerLogin {
			if n := string(data[entity+".name"]); n != "" {
				return []consumerLogin{{n, string(data[entity+".key"])}}
			}
			return nil
		},
		targets: func() []consumerTarget {
			return []consumerTarget{{"mon", func(user, key string) error {
				ok, err := c.Authenticates(context.Background(), user, key)
				if err == nil && !ok {
					err = fmt.Errorf("%s: %w", user, errCephRefused)
				}
				return err
			}}}
		},
		perPod:  1,
		refused: func(err error) bool { return errors.Is(err, errCephRefused) },
		every:   time.Second,
	}
}

// assertNoRefusalsSince waits until every consumer pod logged in twice
// more, and finds none of those logins refused.
func assertNoRefusalsSince(t *testing.T, pc *podConsumers) {
	t.Helper()
	from, refused := pc.attempts.Load(), pc.refused.Load()
	round := int64(consumerReplicas * pc.way.perPod * len(pc.way.targets()))
	waitFor(t, time.Minute, "every consumer pod logged in twice", func() (bool, string) {
		n := pc.attempts.Load() - from
		return n >= 2*round, fmt.Sprintf("%d of %d logins", n, 2*round)
	})
	if n := pc.refused.Load() - refused; n != 0 {
		t.Fatalf("%d logins of the consumer pods refused:\n%s", n, refusalLines(pc.refusalsSince(time.Time{})))
	}
	observed(t, "no login of the consumer pods refused since (%d tried in all)", pc.attempts.Load())
}
