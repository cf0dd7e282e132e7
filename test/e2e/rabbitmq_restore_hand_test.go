package e2e

import (
	"slices"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestRabbitMQRestoreOverHandChange: a RabbitMQ set's member moved to
// rotation r1's user; someone changes that user's password by hand
// (rabbitmqctl change_password); then the status and source Secret are
// restored from a backup taken before r1. rekey serves the current user
// again, but the member keeps r1's, which the broker now refuses. Before,
// the set read Idle with nothing to report until someone asked for a
// rotation, so nothing named a way back (the explorer's RabbitMQ model
// found it: no wedge at 4 steps). Now the upkeep at rest reports the
// generation beside the current user (DualPasswordExists, naming recover)
// with the broker unchanged, and recover moves the member onto the current
// user and deletes the other generation. The member's refusals between the
// person's change and its redeploy are that change's doing; before it and
// after, no login fails.
func TestRabbitMQRestoreOverHandChange(t *testing.T) {
	m := testenv.RabbitMQForTest(t)
	startManager(t, cp.Config)
	ns := newNamespace(t)
	before, backupStatus, backupSource := rabbitRolledOut(t, m, ns, "glance")
	before.assertNoGap(t)
	if err := m.Ctl("change_password", "glance-g2", "changed-by-hand"); err != nil {
		t.Fatal(err)
	}
	restoreSet(t, ns, "glance", backupStatus, backupSource)
	observed(t, "glance-g2's password changed by hand, then the status and source Secret restored from before r1")
	both := []string{"glance-g1", "glance-g2"}

	// No request: the upkeep at rest says what the member runs.
	mustContain(t, "DualPasswordExists event at rest", waitEventNoting(t, ns, "glance", reason.DualPasswordExists, "glance-g2"), "kubectl rekey recover")
	if u := rabbitUsers(t, m, "glance"); !slices.Equal(u, both) {
		t.Fatalf("the upkeep changed the broker's users: %v", u)
	}
	if err := m.CanAuthenticate("glance-g2", "changed-by-hand"); err != nil {
		t.Fatalf("the upkeep changed glance-g2's password: %v", err)
	}

	annotate(t, ns, "glance", engine.RecoverAnnotation, "c1")
	waitFor(t, time.Minute, "recover serves the current user", func() (bool, string) {
		u := string(secretData(t, ns, "glance-transport")["username"])
		return u == "glance-g1", u
	})
	after := startFleet(t, m)
	hash := waitHash(t, ns, "glance")
	after.deploy(t, ns, "glance-transport", "n0")
	if _, err := ack(t, ns, "glance", "nodes", hash, "n0"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "recover's reset deleted glance-g2", func() (bool, string) {
		cs := getSet(t, ns, "glance")
		u := rabbitUsers(t, m, "glance")
		return slices.Equal(u, []string{"glance-g1"}) && cs.Status.Phase == v1.PhaseIdle && !cs.Status.ResetPending, stateOf(cs)
	})
	after.assertNoGap(t)
}
