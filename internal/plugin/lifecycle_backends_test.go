package plugin

import (
	"strings"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// Ceph InPlace keeps no old key: messages must not promise one, and a
// rotation Ceph applied can only complete.
func TestCephInPlaceRotateDiscardAbort(t *testing.T) {
	ns := namespace(t)
	create(t, cephSet(ns, "daemons", v1.CephInPlace, "mgr.a"))
	setStatus(t, ns, "daemons", idle(2))
	setStatus(t, ns, "daemons", func(st *v1.CredentialSetStatus) { st.Phase, st.RotationID = v1.PhaseRotating, "r-3" })
	mustFail(t, ns, `credentialset "daemons" is not Idle: rotation r-3 is active (phase Rotating, Ceph is rotating the keys in place)`, "rotate", "daemons")
	mustFail(t, ns, `rotation r-3 of credentialset "daemons" is still Rotating (Ceph is rotating the keys in place)`, "discard", "daemons")

	// Not applied yet: abort may roll back, and says what it checks.
	out, _, err := kubectl(t, ns, "abort", "daemons")
	if err != nil {
		t.Fatal(err)
	}
	hasLine(t, out, "  1. status returns to Idle with resetPending (Event RotationAborted); the current keys keep working as long as Ceph has not rotated them; if it already rotated a key of this rotation, the operator refuses the rollback (AbortSkipped): an InPlace rotation can then only complete")
	hasLine(t, out, "  2. the distribution Secrets get the current keys again: "+ns+"/daemons-keys")
	hasLine(t, out, "  4. once every consumer rolled out, the operator checks that Ceph still holds the current keys (InPlace deletes nothing: a key Ceph rotated cannot be brought back, and the operator then refuses with KeyMismatch)")
	hasLine(t, out, "  5. the source Secret rekey."+ns+".daemons (in the operator's namespace) drops any pending keys, resetPending is cleared (Event ResetApplied) and the request annotation removed")

	// Applied: the old keys are gone, so abort and recover refuse.
	ns = namespace(t)
	create(t, cephSet(ns, "daemons", v1.CephInPlace, "mgr.a"))
	setStatus(t, ns, "daemons", idle(2))
	setStatus(t, ns, "daemons", distributed("r-3"))
	mustFail(t, ns, `rotation r-3 of credentialset "daemons" replaced the keys in place (Ceph InPlace), so the old keys no longer exist and rolling it back would lock consumers out: it can only complete`, "abort", "daemons")
	setStatus(t, ns, "daemons", degraded(reason.MissingRotationPending, "pending lost"))
	mustFail(t, ns, `rotation r-3 of credentialset "daemons" replaced the keys in place (Ceph InPlace), so the old keys no longer exist and it cannot be rolled back`, "recover", "daemons", "--yes")
	if a := get(t, ns, "daemons").Annotations; a[engine.AbortAnnotation] != "" || a[engine.RecoverAnnotation] != "" {
		t.Fatalf("a refused abort or recover annotated the set: %v", a)
	}

	out, _, err = kubectl(t, ns, "discard", "daemons")
	if err != nil {
		t.Fatal(err)
	}
	hasLine(t, out, "the operator completes the rotation once every consumer has rolled out (0/1 now); the old keys already stopped working when Ceph rotated them (InPlace)")
}

func TestCephOverlappingAbortAndDiscardWait(t *testing.T) {
	ns := namespace(t)
	create(t, cephSet(ns, "csi", v1.CephOverlapping, "client.csi", "client.csi-cephfs"))
	setStatus(t, ns, "csi", idle(3))
	setStatus(t, ns, "csi", func(st *v1.CredentialSetStatus) { distributed("r-4")(st); st.TargetGeneration = 4 })

	out, _, err := kubectl(t, ns, "abort", "csi")
	if err != nil {
		t.Fatal(err)
	}
	hasLine(t, out, "  1. status returns to Idle with resetPending (Event RotationAborted); until step 4 Ceph holds both the current and the new entities, so no consumer loses its login")
	hasLine(t, out, "  4. once every consumer rolled out, the entities newer than the current generation (client.csi.4, client.csi-cephfs.4) are deleted from Ceph: their keys stop working")

	// A second set for discard --wait, followed to the end.
	create(t, cephSet(ns, "rgw", v1.CephOverlapping, "client.rgw"))
	setStatus(t, ns, "rgw", idle(3))
	setStatus(t, ns, "rgw", func(st *v1.CredentialSetStatus) { distributed("r-9")(st); st.TargetGeneration = 4 })
	ch := kubectlAsync(t, ns, "discard", "rgw", "--wait", "--timeout", "20s")
	requested(t, ns, "rgw", engine.DiscardAnnotation)
	settle()
	setStatus(t, ns, "rgw", func(st *v1.CredentialSetStatus) { idle(4)(st); st.LastRotationID = "r-9" })
	r := await(t, ch)
	if r.err != nil {
		t.Fatalf("discard --wait: %v\n%s", r.err, r.out)
	}
	for _, want := range []string{
		"the operator completes the rotation once every consumer has rolled out (0/1 now), keeping each entity's newest prior entity (keepPriorKeyCount)\n",
		"waiting up to 20s for rotation r-9 to complete (phase Idle, generation 4)\n",
		"rotation r-9 complete: generation 4 is current, prior entities beyond keepPriorKeyCount 1 were removed\n",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
}

// Ceph mints its keys: recover cannot reset one, and says what to do.
func TestRecoverCephKeyMismatchWhileIdle(t *testing.T) {
	ns := namespace(t)
	create(t, cephSet(ns, "daemons", v1.CephInPlace, "mgr.a"))
	setStatus(t, ns, "daemons", idle(2))
	msg := "the cluster's key for mgr.a is not the one the source Secret holds (changed outside rekey): delete mgr.a from the source Secret and rekey adopts the cluster's key, then rotate again; the rotation did not start"
	setStatus(t, ns, "daemons", degraded(reason.KeyMismatch, msg))
	mustFail(t, ns, `credentialset "daemons" is degraded (KeyMismatch), which kubectl rekey recover cannot repair for Ceph: Ceph mints its keys, so rekey cannot reset one to the source Secret's. Do what the operator says: `+msg, "recover", "daemons", "--yes")
}

func TestRabbitMQDiscardAbortRecover(t *testing.T) {
	ns := namespace(t)
	create(t, rabbitSet(ns, "nova"))
	setStatus(t, ns, "nova", idle(3))
	setStatus(t, ns, "nova", func(st *v1.CredentialSetStatus) {
		distributed("r-4")(st)
		st.TargetGeneration, st.ConsumersUpdated = 4, "1/2"
	})

	out, _, err := kubectl(t, ns, "discard", "nova")
	if err != nil {
		t.Fatal(err)
	}
	hasLine(t, out, "the operator deletes the old user once every consumer of this set has moved (1/2 now)")

	ns = namespace(t)
	create(t, rabbitSet(ns, "nova"))
	setStatus(t, ns, "nova", idle(3))
	setStatus(t, ns, "nova", func(st *v1.CredentialSetStatus) { distributed("r-4")(st); st.TargetGeneration = 4 })
	ch := kubectlAsync(t, ns, "abort", "nova", "--wait", "--timeout", "20s")
	requested(t, ns, "nova", engine.AbortAnnotation)
	settle()
	setStatus(t, ns, "nova", rolledBack)
	settle()
	setStatus(t, ns, "nova", func(st *v1.CredentialSetStatus) { st.ResetPending = false })
	r := await(t, ch)
	if r.err != nil {
		t.Fatalf("abort --wait: %v\n%s", r.err, r.out)
	}
	for _, want := range []string{
		"  1. status returns to Idle with resetPending (Event RotationAborted); until step 4 RabbitMQ has both the current and the new user, so no consumer loses its login\n",
		"  4. once every consumer rolled out, the current user gets the source Secret's password, tags and permissions again (recreated if missing), then every other nova-g<N> user, the new one among them, is deleted\n",
		"waiting up to 20s for rotation r-4 to be rolled back (phase Idle, RabbitMQ reset to the current passwords)\n",
		"rotation r-4 rolled back: RabbitMQ has only the current user (generation 3) again\n",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}

	// A password changed outside rekey: recover resets the broker's user.
	setStatus(t, ns, "nova", degraded(reason.KeyMismatch, "user nova-g3 does not accept the password the source Secret holds for it"))
	out, err = kubectlIn(t, ns, "n\n", "recover", "nova")
	if err == nil {
		t.Fatal("recover went ahead without a yes")
	}
	hasLine(t, out, "The operator resets RabbitMQ to the current passwords, in this order:")
	hasLine(t, out, "  1. status gets resetPending (Event RecoveryStarted); the consumers restart onto the current passwords: StatefulSet "+ns+"/nova-api")
	if strings.Contains(out, "ALTER USER") || strings.Contains(out, "MySQL") {
		t.Errorf("recover of a RabbitMQ set speaks MySQL:\n%s", out)
	}
}

// A broker password changed outside rekey refuses the rotation: --wait
// ends with the operator's words instead of running into its timeout.
func TestRotateWaitEndsOnKeyMismatch(t *testing.T) {
	ns := namespace(t)
	create(t, rabbitSet(ns, "nova"))
	setStatus(t, ns, "nova", idle(3))

	ch := kubectlAsync(t, ns, "rotate", "nova", "--wait", "--timeout", "20s")
	requested(t, ns, "nova", engine.RotateAnnotation)
	msg := "user nova-g3 on https://rabbitmq.openstack.svc:15671 does not accept the password the source Secret holds for it (changed outside rekey?), so the rotation did not start"
	event(t, get(t, ns, "nova"), "Warning", reason.KeyMismatch, msg, time.Now())

	r := await(t, ch)
	if r.err == nil || r.err.Error() != "the operator refused (KeyMismatch): "+msg {
		t.Fatalf("rotate --wait: error %v, want the refusal\n%s", r.err, r.out)
	}
}
