package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/backend/cephkube"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestCephNoLockout: what the Ceph backend must get right so that no set
// rotates keys it should not, keeps keys it was told to drop, or deletes
// another set's — on the real mon, one manager for every case. The manager
// runs a CLI that answers `ceph version` with what the test says (a mon
// cannot change version on demand) and passes every other command to the
// real mon; it reports the mon's real version unless a case changes it.
func TestCephNoLockout(t *testing.T) {
	c := testenv.CephForTest(t)
	cli, setVersion := versionWrapper(t, c, c.Version)
	startManager(t, cp.Config, withCephWorkDir(c), func(r *controller.Reconciler) {
		r.ResyncPeriod = time.Second
		r.Settings.Set(cephkube.FlagCLI, cli)
	})
	ns := newNamespace(t)

	// Keys rekey found have no known minting version: status.keyVersion
	// stays empty, so WithVersionUpgrade replaces them once.
	t.Run("AdoptedKeysHaveNoVersion", func(t *testing.T) {
		const name, entity = "adopted", "client.lo-adopted"
		if _, err := c.CLI(ctxT(t), "auth", "get-or-create", entity, "mon", "allow r"); err != nil {
			t.Fatal(err)
		}
		found, err := c.Key(ctxT(t), entity)
		if err != nil {
			t.Fatal(err)
		}
		cs := policySet(t, c, ns, name, entity, v1.RotationSpec{})
		if cs.Status.KeyVersion != "" {
			t.Fatalf("keyVersion %q for an adopted key, want empty (its minting version is unknown)", cs.Status.KeyVersion)
		}
		if key := assertCephSecrets(t, c, cs, entity)[entity]; key != found {
			t.Fatal("the key that existed was not adopted")
		}
		setRotation(t, ns, name, func(r *v1.RotationSpec) { r.Policy = v1.PolicyWithVersionUpgrade })
		mustContain(t, "PolicyTriggered", waitEvent(t, ns, name, string(reason.PolicyTriggered)), "unknown", c.Version)
		cs = waitPhase(t, ns, name, v1.PhaseDistributed, 1)
		discard(t, ns, name, cs.Status.RotationID)
		cs = waitPhase(t, ns, name, v1.PhaseIdle, 2)
		if cs.Status.KeyVersion != c.Version {
			t.Fatalf("keyVersion %q after the rotation, want the mon's %s", cs.Status.KeyVersion, c.Version)
		}
		key := assertKeysReplaced(t, c, cs, map[string]string{entity: found})[entity]
		holdsFor(t, quiet, "keys minted by the running version are not rotated again", idleAt(t, ns, name, 2, cs.Status.LastRotationID))
		assertKeyKept(t, c, ns, name, entity, key)
	})

	// keyGeneration 3 at creation is the generation of the keys rekey
	// mints (Rook's reading): client.x.3, no rotation right after.
	t.Run("KeyGenerationAtCreation", func(t *testing.T) {
		const name, entity = "csi", "client.lo-csi"
		cs := cephSet(t, c, ns, name, v1.CephOverlapping, v1.CephEntity{Name: entity, Caps: v1.CephCaps{Mon: "profile rbd"}})
		cs.Spec.Rotation = v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: ptr.To(int64(3))}
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Fatal(err)
		}
		deleteAtEnd(t, cs)
		cs = waitPhase(t, ns, name, v1.PhaseIdle, 3)
		assertCephSecrets(t, c, cs, entity)
		if got := cephEntities(t, c, entity+"."); !slices.Equal(got, []string{entity + ".3"}) {
			t.Fatalf("the mon has %v, want only %s.3", got, entity)
		}
		if n := string(secretData(t, ns, name+"-keys")[entity+".name"]); n != entity+".3" {
			t.Fatalf("consumers are given %q, want %s.3", n, entity)
		}
		holdsFor(t, quiet, "a set created at keyGeneration 3 does not rotate", idleAt(t, ns, name, 3, ""))
		if notes := eventNotes(t, ns, name, reason.RotationStarted); len(notes) > 0 {
			t.Fatalf("rotations started right after provisioning: %v", notes)
		}
	})

	// A mon without `ceph auth rotate`: an InPlace rotation is refused
	// before any key changes, saying why and what to do, and goes ahead
	// once the mon is new enough.
	t.Run("InPlaceUnsupported", func(t *testing.T) {
		const name, entity = "oldmon", "client.lo-old"
		t.Cleanup(func() { setVersion(c.Version) })
		setVersion("19.2.2")
		cs := policySet(t, c, ns, name, entity, v1.RotationSpec{})
		key := assertCephSecrets(t, c, cs, entity)[entity]
		rotate(t, ns, name, "r1")
		msg := waitDegraded(t, ns, name, reason.InPlaceUnsupported)
		mustContain(t, "the InPlaceUnsupported condition", msg, "19.2.2", ceph.MinRotateVersion, "strategy: Overlapping")
		mustContain(t, "the InPlaceUnsupported event", waitEvent(t, ns, name, string(reason.InPlaceUnsupported)), "19.2.2", ceph.MinRotateVersion)
		if cs := getSet(t, ns, name); cs.Status.Phase != v1.PhaseIdle || cs.Status.RotationID != "" {
			t.Fatalf("a refused rotation started: %s", stateOf(cs))
		}
		assertKeyKept(t, c, ns, name, entity, key)

		setVersion(c.Version)
		annotate(t, ns, name, "test.rekey.io/nudge", "upgraded") // instead of waiting for the minute's retry
		waitPhase(t, ns, name, v1.PhaseDistributed, 1)
		discard(t, ns, name, "r1")
		cs = waitPhase(t, ns, name, v1.PhaseIdle, 2)
		assertKeysReplaced(t, c, cs, map[string]string{entity: key})
	})

	// Lowering keepPriorKeyCount (Rook's last migration step) deletes the
	// surplus priors while the set is idle, not at some later discard.
	t.Run("LoweredKeepPriorKeyCount", func(t *testing.T) {
		const name, entity = "trim", "client.lo-trim"
		cs := cephSet(t, c, ns, name, v1.CephOverlapping, v1.CephEntity{Name: entity, Caps: v1.CephCaps{Mon: "profile rbd"}})
		cs.Spec.Ceph.KeepPriorKeyCount = ptr.To(int32(1))
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Fatal(err)
		}
		deleteAtEnd(t, cs)
		g1 := assertCephSecrets(t, c, waitPhase(t, ns, name, v1.PhaseIdle, 1), entity)[entity]
		rotate(t, ns, name, "r1")
		waitPhase(t, ns, name, v1.PhaseDistributed, 1)
		discard(t, ns, name, "r1")
		cs = waitPhase(t, ns, name, v1.PhaseIdle, 2)
		if p := cs.Status.PriorKeyCount; p == nil || *p != 1 {
			t.Fatalf("priorKeyCount %v, want 1", p)
		}
		if !cephAuthenticates(t, c, entity+".1", g1) {
			t.Fatal("the prior generation kept by keepPriorKeyCount 1 does not authenticate")
		}

		updateSpec(t, ns, name, func(cs *v1.CredentialSet) { cs.Spec.Ceph.KeepPriorKeyCount = ptr.To(int32(0)) })
		mustContain(t, "PriorKeysRetired", waitEvent(t, ns, name, string(reason.PriorKeysRetired)), entity+".1", "keepPriorKeyCount 0")
		eventually(t, time.Minute, "priorKeyCount 0", func() (bool, string) {
			cs = getSet(t, ns, name)
			return cs.Status.PriorKeyCount != nil && *cs.Status.PriorKeyCount == 0, stateOf(cs)
		})
		if got := cephEntities(t, c, entity+"."); !slices.Equal(got, []string{entity + ".2"}) {
			t.Fatalf("the mon has %v, want only %s.2", got, entity)
		}
		if cephAuthenticates(t, c, entity+".1", g1) {
			t.Fatal("the prior generation outlived keepPriorKeyCount 0")
		}
		if cs.Status.KeyGeneration != 2 || cs.Status.LastRotationID != "r1" || cs.Status.Phase != v1.PhaseIdle {
			t.Fatalf("applying keepPriorKeyCount rotated: %s", stateOf(cs))
		}
		assertCephSecrets(t, c, cs, entity)
	})

	// A second set naming an entity the first rotates — itself, or one of
	// its Overlapping generations — is refused before it runs a command;
	// the first goes on rotating.
	t.Run("EntityOfAnotherSet", func(t *testing.T) {
		other := newNamespace(t)
		const shared = "client.lo-shared"
		first := policySet(t, c, ns, "first", shared, v1.RotationSpec{})
		second := cephSet(t, c, other, "second", v1.CephInPlace, v1.CephEntity{Name: shared, Caps: v1.CephCaps{Mon: "allow r"}})
		if err := k8s.Create(ctxT(t), second); err != nil {
			t.Fatal(err)
		}
		deleteAtEnd(t, second)
		msg := waitDegraded(t, other, "second", reason.InvalidSpec)
		// The refusal says the entity is taken, not by whom: the first set
		// is in a namespace the second's readers may not see.
		mustContain(t, "the InvalidSpec condition", msg, "a CredentialSet in another namespace", shared, "spec.ceph.entities")
		mustContain(t, "the InvalidSpec event", waitEvent(t, other, "second", string(reason.InvalidSpec)), "a CredentialSet in another namespace", shared)
		if strings.Contains(msg, ns) {
			t.Fatalf("the refusal names the first set's namespace %s: %q", ns, msg)
		}
		if rec, err := c.CLI(ctxT(t), "config-key", "get", "rekey/owner/"+shared); err != nil || !strings.HasPrefix(string(rec), string(first.UID)+" ") {
			t.Fatalf("%s's ownership record is %q (%v), want the first set's", shared, rec, err)
		}

		const ovl = "client.lo-ovl"
		gens := cephSet(t, c, ns, "gens", v1.CephOverlapping, v1.CephEntity{Name: ovl, Caps: v1.CephCaps{Mon: "profile rbd"}})
		if err := k8s.Create(ctxT(t), gens); err != nil {
			t.Fatal(err)
		}
		deleteAtEnd(t, gens)
		waitPhase(t, ns, "gens", v1.PhaseIdle, 1)
		taker := cephSet(t, c, other, "taker", v1.CephInPlace, v1.CephEntity{Name: ovl + ".2", Caps: v1.CephCaps{Mon: "allow r"}})
		if err := k8s.Create(ctxT(t), taker); err != nil {
			t.Fatal(err)
		}
		deleteAtEnd(t, taker)
		mustContain(t, "the InvalidSpec condition", waitDegraded(t, other, "taker", reason.InvalidSpec), "a CredentialSet in another namespace", "generation 2 of "+ovl)
		if got := cephEntities(t, c, ovl+".2"); len(got) != 0 {
			t.Fatalf("the refused set created %v", got)
		}
		// The set that was first makes its generation 2 as if the other
		// had never been created.
		rotate(t, ns, "gens", "r1")
		waitPhase(t, ns, "gens", v1.PhaseDistributed, 1)
		discard(t, ns, "gens", "r1")
		cs := waitPhase(t, ns, "gens", v1.PhaseIdle, 2)
		assertCephSecrets(t, c, cs, ovl)
		if st := getSet(t, other, "taker").Status; st.KeyGeneration != 0 {
			t.Fatalf("the refused set reached generation %d", st.KeyGeneration)
		}
	})
}
