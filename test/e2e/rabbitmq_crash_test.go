package e2e

import (
	"fmt"
	"slices"
	"testing"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/rabbitmq"
	"rekey.io/rekey/internal/testenv"
)

// TestRabbitMQCrashSafety kills the real manager after every persisted step
// of provisioning, rotation and retirement. After each kill no user exists
// whose password the source Secret lacks (stored before applied), a member that keeps
// logging in never fails (never lock out), and a fresh manager completes the cycle;
// a user orphaned by a lost rotation is found in the broker and removed.
func TestRabbitMQCrashSafety(t *testing.T) {
	m := testenv.RabbitMQForTest(t)
	ns := newNamespace(t)
	group := v1.ConsumerGroup{Name: "nodes", Members: []string{"n0"}}
	cs := rabbitSet(t, ns, "glance", m, group)
	if err := k8sCreate(t, cs); err != nil {
		t.Fatal(err)
	}
	for _, fp := range []string{"provision/source-stored", "provision/rabbitmq-user-put"} {
		startManagerProcess(t, fp).waitKilled(t, fp)
		assertStoredUsers(t, "killed at "+fp, m, getSet(t, ns, "glance"))
	}
	mp := startManagerProcess(t, "")
	waitPhase(t, ns, "glance", v1.PhaseIdle, 1)
	mp.stop()

	f := startFleet(t, m)
	f.deploy(t, ns, "glance-transport", "n0")

	rotateFPs := []string{"rotate/phase-rotating", "rotate/pending-stored", "rotate/rabbitmq-user-put",
		"rotate/rotate-applied", "rotate/pending-distributed", "rotate/phase-distributed"}
	discardFPs := []string{"discard/rabbitmq-user-deleted", "discard/discard-applied", "discard/confirmed",
		"discard/phase-idle", "discard/discard-applied", "discard/confirmed"}
	for n, rfp := range rotateFPs {
		dfp := discardFPs[n]
		gen := int64(n + 1)
		id := fmt.Sprintf("crash-%d", n)

		mp := startManagerProcess(t, rfp)
		rotate(t, ns, "glance", id)
		mp.waitKilled(t, rfp)
		assertStoredUsers(t, "killed at "+rfp, m, getSet(t, ns, "glance"))
		if n == 0 {
			// An orphan: a generation user nobody recorded, as a rotation
			// whose status was lost leaves behind (made by rekey, so marked
			// as this set's). The resumed rotation must find it in the
			// broker and remove it.
			mark := rabbitmq.OwnerTag(string(getSet(t, ns, "glance").UID))
			if _, err := m.Client().PutUser("glance-g9", rabbithole.UserSettings{Password: "orphan-password-0123456789", Tags: rabbithole.UserTags{mark}}); err != nil {
				t.Fatal(err)
			}
		}

		mp = startManagerProcess(t, dfp)
		waitPhase(t, ns, "glance", v1.PhaseDistributed, gen)
		hash := waitHash(t, ns, "glance")
		if u := rabbitUsers(t, m, "glance"); !slices.Equal(u, []string{fmt.Sprintf("glance-g%d", gen), fmt.Sprintf("glance-g%d", gen+1)}) {
			t.Fatalf("after a crash at %s the broker has users %v: want exactly the current and the pending generation (orphans removed)", rfp, u)
		}
		// The member moves, and says so; retirement follows by itself.
		f.deploy(t, ns, "glance-transport", "n0")
		if _, err := ack(t, ns, "glance", "nodes", hash, "n0"); err != nil {
			t.Fatal(err)
		}
		mp.waitKilled(t, dfp)
		assertStoredUsers(t, "killed at "+dfp, m, getSet(t, ns, "glance"))

		mp = startManagerProcess(t, "")
		waitPhase(t, ns, "glance", v1.PhaseIdle, gen+1)
		if u := rabbitUsers(t, m, "glance"); !slices.Equal(u, []string{fmt.Sprintf("glance-g%d", gen+1)}) {
			t.Fatalf("after the cycle with crashes at %s and %s the broker has users %v", rfp, dfp, u)
		}
		mp.stop()
		t.Logf("cycle %d: crashed at %s and %s, completed at generation %d", n+1, rfp, dfp, gen+1)
	}
	f.assertNoGap(t)
}
