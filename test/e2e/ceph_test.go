package e2e

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestCephInPlace rotates daemon-style keys in place on the real mon, in
// the full control plane: the new keys authenticate and the old ones are
// refused at once, every Secret holds what the mon holds (read back, never
// guessed), and the consuming Deployment rolls — counting as moved only
// once its rollout completed after the change.
func TestCephInPlace(t *testing.T) {
	c := testenv.CephForTest(t)
	full := testenv.FullControlPlaneForTest(t, testenv.ControlPlaneOptions{CRDDirectoryPaths: []string{"config/crd/bases"}})
	kc, err := client.New(full.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	plain := k8s
	k8s = kc
	t.Cleanup(func() { k8s = plain })
	ns := "cephapp"
	for _, n := range []string{OperatorNamespace, ns} {
		if err := kc.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	startManager(t, full.Config, withCephWorkDir(c))

	// mgr.x exists before rekey: its key is adopted, read from the mon.
	if _, err := c.CLI(ctxT(t), "auth", "get-or-create", "mgr.x", "mon", "allow profile mgr"); err != nil {
		t.Fatal(err)
	}
	adopted, err := c.Key(ctxT(t), "mgr.x")
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "rgw"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rgw"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{testenv.ReadyDelayAnnotation: "3s"}},
				Spec:       corev1.PodSpec{NodeName: full.NodeName, Containers: []corev1.Container{{Name: "rgw", Image: "rgw:1"}}},
			},
		},
	}
	if err := kc.Create(ctxT(t), dep); err != nil {
		t.Fatal(err)
	}
	cs := cephSet(t, c, ns, "daemons", v1.CephInPlace,
		v1.CephEntity{Name: "client.rgw.a", Caps: v1.CephCaps{Mon: "allow rw", OSD: "allow rwx"}},
		v1.CephEntity{Name: "mgr.x", Caps: v1.CephCaps{Mon: "allow profile mgr"}})
	cs.Spec.Consumers = []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "rgw"}}
	cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout, GracePeriod: &metav1.Duration{Duration: time.Second}}
	if err := kc.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "daemons", v1.PhaseIdle, 1)
	// mgr.x was found, not minted: nobody knows which version minted it,
	// so keyVersion is empty (WithVersionUpgrade would replace it).
	if cs.Status.KeyVersion != "" {
		t.Fatalf("status.keyVersion %q with an adopted key, want empty", cs.Status.KeyVersion)
	}
	old := assertCephSecrets(t, c, cs, "client.rgw.a", "mgr.x")
	if old["mgr.x"] != adopted {
		t.Fatal("the existing mgr.x key was not adopted")
	}
	eventually(t, 2*time.Minute, "consumer moved before the rotation", func() (bool, string) {
		cs := getSet(t, ns, "daemons")
		return cs.Status.ConsumersUpdated == "1/1", cs.Status.ConsumersUpdated
	})

	healthy := time.Now()
	rotate(t, ns, "daemons", "r1")
	// While the Deployment rolls (3 s per pod), it has not moved: its pods
	// became ready before the change, which does not count.
	eventually(t, time.Minute, "consumer not moved for the new keys", func() (bool, string) {
		cs := getSet(t, ns, "daemons")
		if cs.Status.Phase != v1.PhaseDistributed || len(cs.Status.Consumers) == 0 {
			return false, stateOf(cs)
		}
		st := cs.Status.Consumers[0]
		return st.SecretHash == cs.Status.SecretHash && !st.RolledOut, stateOf(cs)
	})
	cs = waitPhase(t, ns, "daemons", v1.PhaseIdle, 2)
	assertNoWarningSince(t, ns, "daemons", healthy, "a healthy in-place rotation with a consumer")
	if cs.Status.KeyVersion != c.Version {
		t.Fatalf("status.keyVersion %q after rekey minted every key, want the mon's %q", cs.Status.KeyVersion, c.Version)
	}
	moved := cs.Status.Consumers[0]
	if !moved.RolledOut || moved.MovedAt == nil {
		t.Fatalf("consumer after the rotation: %+v", moved)
	}
	now := assertCephSecrets(t, c, cs, "client.rgw.a", "mgr.x")
	for e, k := range old {
		if now[e] == k {
			t.Fatalf("%s kept its key through the rotation", e)
		}
		if cephAuthenticates(t, c, e, k) {
			t.Fatalf("the old key of %s still authenticates after an in-place rotation", e)
		}
	}
	d := &appsv1.Deployment{}
	if err := kc.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "rgw"}, d); err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Annotations[naming.RestartAnnotation(cs)]; !engine.RestartFor(got, "r1") || got != cs.Status.RestartID {
		t.Fatalf("the consumer's template carries restart value %q, want r1's (status.restartID %q)", got, cs.Status.RestartID)
	}
	if ro := engine.DeploymentRollout(d); !ro.Done {
		t.Fatalf("the consumer did not roll: %s", ro.Message)
	}

	// An in-place rotation that applied cannot be rolled back: the old keys
	// no longer exist.
	updateSpec(t, ns, "daemons", func(cs *v1.CredentialSet) { cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardManual} })
	rotate(t, ns, "daemons", "r2")
	waitPhase(t, ns, "daemons", v1.PhaseDistributed, 2)
	annotate(t, ns, "daemons", engine.AbortAnnotation, "r2")
	mustContain(t, "AbortSkipped", waitEvent(t, ns, "daemons", string(reason.AbortSkipped)), "replaced the secrets in place")
	discard(t, ns, "daemons", "r2")
	cs = waitPhase(t, ns, "daemons", v1.PhaseIdle, 3)
	assertCephSecrets(t, c, cs, "client.rgw.a", "mgr.x")
	keys := []string{}
	for _, k := range now {
		keys = append(keys, k)
	}
	assertNoSecretLeaked(t, ns, "daemons", map[string]string{"rgw": keys[0], "mgr": keys[1], "old-rgw": old["client.rgw.a"]})
}

// assertCephSecrets: for each entity the mon's key is the one the source
// Secret holds and every distribution Secret serves; it returns them.
func assertCephSecrets(t testing.TB, c *testenv.Ceph, cs *v1.CredentialSet, entities ...string) map[string]string {
	t.Helper()
	src := sourceData(t, cs)
	dist := secretData(t, cs.Namespace, cs.Spec.Distribution[0].Name)
	out := map[string]string{}
	for _, e := range entities {
		entity, key := keyOf(t, src[e])
		onMon, err := c.Key(ctxT(t), entity)
		if err != nil {
			t.Fatal(err)
		}
		if onMon != key {
			t.Fatalf("the source Secret's key for %s is not the mon's", entity)
		}
		if string(dist[e+".key"]) != key || string(dist[e+".name"]) != entity {
			t.Fatalf("the distribution Secret does not serve %s's current key", entity)
		}
		if !cephAuthenticates(t, c, entity, key) {
			t.Fatalf("%s's current key does not authenticate", entity)
		}
		out[e] = key
	}
	return out
}

// TestCephOverlapping: a client key with outside consumers gets a new
// entity per generation; during the overlap both authenticate, discard
// keeps keepPriorKeyCount prior generations, an abort removes the new one,
// and a newer generation found in `ceph auth ls` holds rotations until
// recover removes it.
func TestCephOverlapping(t *testing.T) {
	c := testenv.CephForTest(t)
	startManager(t, cp.Config, withCephWorkDir(c))
	ns := newNamespace(t)
	cs := cephSet(t, c, ns, "csi", v1.CephOverlapping, v1.CephEntity{Name: "client.csi", Caps: v1.CephCaps{Mon: "profile rbd", OSD: "profile rbd pool=rbd"}})
	cs.Spec.Ceph.KeepPriorKeyCount = ptr.To(int32(1))
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "csi", v1.PhaseIdle, 1)
	g1 := assertCephSecrets(t, c, cs, "client.csi")["client.csi"]
	wantEntities(t, c, "client.csi.1")
	if p := cs.Status.PriorKeyCount; p == nil || *p != 0 {
		t.Fatalf("priorKeyCount %v after provisioning, want 0", p)
	}

	healthy := time.Now()
	rotate(t, ns, "csi", "r1")
	cs = waitPhase(t, ns, "csi", v1.PhaseDistributed, 1)
	_, g2 := keyOf(t, sourceData(t, cs)["client.csi"+engine.PendingSuffix])
	if !cephAuthenticates(t, c, "client.csi.1", g1) || !cephAuthenticates(t, c, "client.csi.2", g2) {
		t.Fatal("during the overlap both generations must authenticate")
	}
	if n := string(secretData(t, ns, "csi-keys")["client.csi.name"]); n != "client.csi.2" {
		t.Fatalf("distribution names %q, want client.csi.2", n)
	}
	discard(t, ns, "csi", "r1")
	cs = waitPhase(t, ns, "csi", v1.PhaseIdle, 2)
	wantEntities(t, c, "client.csi.1", "client.csi.2")
	if p := cs.Status.PriorKeyCount; p == nil || *p != 1 {
		t.Fatalf("priorKeyCount %v, want 1", p)
	}

	rotate(t, ns, "csi", "r2")
	waitPhase(t, ns, "csi", v1.PhaseDistributed, 2)
	discard(t, ns, "csi", "r2")
	cs = waitPhase(t, ns, "csi", v1.PhaseIdle, 3)
	wantEntities(t, c, "client.csi.2", "client.csi.3")
	assertNoWarningSince(t, ns, "csi", healthy, "two healthy overlapping rotations")
	if cephAuthenticates(t, c, "client.csi.1", g1) {
		t.Fatal("generation 1 outlived keepPriorKeyCount 1")
	}

	// Abort while Distributed: consumers go back to generation 3, then the
	// new entity is removed.
	rotate(t, ns, "csi", "r3")
	waitPhase(t, ns, "csi", v1.PhaseDistributed, 3)
	wantEntities(t, c, "client.csi.2", "client.csi.3", "client.csi.4")
	annotate(t, ns, "csi", engine.AbortAnnotation, "r3")
	eventually(t, time.Minute, "rollback finished", func() (bool, string) {
		cs = getSet(t, ns, "csi")
		return cs.Status.Phase == v1.PhaseIdle && !cs.Status.ResetPending, stateOf(cs)
	})
	wantEntities(t, c, "client.csi.2", "client.csi.3")
	assertCephSecrets(t, c, cs, "client.csi")

	// A newer generation the set's status never recorded (a status
	// restored from before a rotation, whose consumers may hold its key)
	// is found in the mon: the next rotation is refused, naming it and
	// recover, and nothing is removed; recover removes it, and the kept
	// request then runs. rekey records its ownership in the mon before it
	// creates an entity, so such a generation carries that record; one
	// without it is refused instead (internal/backend/ceph
	// TestOwnershipOnTheRealMon).
	if _, err := c.CLI(ctxT(t), "config-key", "set", "rekey/owner/client.csi.9", string(cs.UID)+" "+ns+"/csi"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CLI(ctxT(t), "auth", "get-or-create", "client.csi.9", "mon", "profile rbd"); err != nil {
		t.Fatal(err)
	}
	rotate(t, ns, "csi", "r4")
	mustContain(t, "DualPasswordExists event", waitEventNoting(t, ns, "csi", reason.DualPasswordExists, "client.csi.9"), "kubectl rekey recover")
	wantEntities(t, c, "client.csi.2", "client.csi.3", "client.csi.9")
	annotate(t, ns, "csi", engine.RecoverAnnotation, "c4")
	waitPhase(t, ns, "csi", v1.PhaseDistributed, 3)
	wantEntities(t, c, "client.csi.2", "client.csi.3", "client.csi.4")
	discard(t, ns, "csi", "r4")
	cs = waitPhase(t, ns, "csi", v1.PhaseIdle, 4)
	wantEntities(t, c, "client.csi.3", "client.csi.4")

	// Deleted with the default policy (Discard): the prior generation goes,
	// the current one stays, works, and no longer carries rekey's record,
	// and the source Secret is emptied; the distribution Secret stays.
	g4 := assertCephSecrets(t, c, cs, "client.csi")["client.csi"]
	if err := k8s.Delete(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitSetGone(t, ns, "csi")
	waitEvent(t, ns, "csi", string(reason.Released))
	wantEntities(t, c, "client.csi.4")
	if !cephAuthenticates(t, c, "client.csi.4", g4) {
		t.Fatal("the current generation must still authenticate after the set's deletion")
	}
	if out, err := c.CLI(ctxT(t), "config-key", "exists", "rekey/owner/client.csi.4"); err == nil {
		t.Fatalf("rekey's record of client.csi.4 outlived the set: %s", out)
	}
	if left := secretData(t, OperatorNamespace, naming.SourceSecretName(cs)); len(left) != 0 {
		t.Fatalf("the source Secret keeps %d keys after deletion", len(left))
	}
	if n := string(secretData(t, ns, "csi-keys")["client.csi.name"]); n != "client.csi.4" {
		t.Fatalf("the distribution Secret names %q after deletion, want client.csi.4", n)
	}
}

func wantEntities(t testing.TB, c *testenv.Ceph, want ...string) {
	t.Helper()
	got := cephEntities(t, c, "client.csi.")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the mon has entities %v, want %v", got, want)
	}
}
