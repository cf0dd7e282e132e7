package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/metrics"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestApplicationUserAfterRollout: rekey creates an application user with
// its grants on every instance (connecting as a separate, unrotated admin),
// and with discardPolicy AfterRollout finishes the rotation by itself once
// its declared consumer acknowledged the new password.
func TestApplicationUserAfterRollout(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	ns := newNamespace(t)
	startManager(t, cp.Config)
	cs := appUserSet(t, ns, "orders", c, v1.MySQLGrant{Privileges: []string{"SELECT", "INSERT"}, Object: "orders.*"})
	cs.Spec.ConsumerGroups = []v1.ConsumerGroup{ackerGroup("vm-1")}
	cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout, GracePeriod: &metav1.Duration{Duration: time.Second}}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitPhase(t, ns, "orders", v1.PhaseIdle, 1)
	keys := map[string]string{"ORDERS_PASSWORD": "orders"}
	gen1 := userPasswords(sourceData(t, cs), keys, "")
	loginMatrix(t, "after provisioning", c.Instances(), gen1, nil)
	for _, i := range c.Instances() {
		// SHOW GRANTS returns one row per grant; the first is USAGE.
		db, _ := i.DB()
		rows, err := db.Query("SHOW GRANTS FOR 'orders'@'%'")
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		for rows.Next() {
			var s string
			rows.Scan(&s)
			all = append(all, s)
		}
		rows.Close()
		db.Close()
		if !strings.Contains(strings.Join(all, ";"), "GRANT SELECT, INSERT ON `orders`.* TO `orders`@`%`") {
			t.Fatalf("%s: grants of orders = %v", i.Name, all)
		}
	}
	if got := userPasswords(secretData(t, ns, "orders-db"), keys, ""); !equalMaps(got, gen1) {
		t.Fatal("distributed Secret does not hold ORDERS_PASSWORD")
	}
	p := startProber(t, c.Instances(), ns, "orders-db", keys)
	rotate(t, ns, "orders", "orders-1")
	// No discard request: the consumer outside Kubernetes acknowledges the
	// new password, then AfterRollout and a 1 s grace period end the
	// rotation.
	ackEveryDistribution(t, ns, "orders", "vm-1")
	cs = waitPhase(t, ns, "orders", v1.PhaseIdle, 2)
	src := sourceData(t, cs)
	gen2 := userPasswords(src, keys, "")
	loginMatrix(t, "after the automatic discard", c.Instances(), gen2, gen1)
	if _, ok := src["ORDERS_PASSWORD"+engine.PendingSuffix]; ok {
		t.Fatal("pending key left after completion")
	}
	mustContain(t, "DiscardApplied event", waitEvent(t, ns, "orders", string(reason.DiscardApplied)), "AfterRollout")
	p.assertNoGap(t)

	set := map[string]string{"namespace": ns, "name": "orders"}
	assertRotationResults(t, ns, "orders", 1, 0, 0)
	// The last success comes from status, so a restarted manager serves it
	// again: drop every series of the set (what a restart loses), wake the
	// set, and the same value is back.
	wantLast := float64(getSet(t, ns, "orders").Status.CurrentSince.Unix())
	if v, ok := metricValue(t, "rekey_last_successful_rotation_timestamp_seconds", set); !ok || v != wantLast {
		t.Fatalf("rekey_last_successful_rotation_timestamp_seconds = %v (present %v), want status.currentSince %v", v, ok, wantLast)
	}
	metrics.Forget(ns, "orders")
	annotate(t, ns, "orders", "test.rekey.io/touch", time.Now().String())
	eventually(t, 30*time.Second, "the last success served again after the series were dropped", func() (bool, string) {
		v, ok := metricValue(t, "rekey_last_successful_rotation_timestamp_seconds", set)
		return ok && v == wantLast, fmt.Sprintf("%v (present %v), want %v", v, ok, wantLast)
	})
	eventually(t, 30*time.Second, "metrics observe generation 2 in Idle", func() (bool, string) {
		g, _ := metricValue(t, "rekey_key_generation", set)
		idle, _ := metricValue(t, "rekey_credentialset_phase", map[string]string{"namespace": ns, "name": "orders", "phase": "Idle"})
		return g == 2 && idle == 1, fmt.Sprintf("generation %v, idle %v", g, idle)
	})
	if _, ok := metricValue(t, "rekey_credential_age_seconds", set); !ok {
		t.Fatal("no rekey_credential_age_seconds for the set")
	}
	if n, _ := metricValue(t, "rekey_phase_duration_seconds", map[string]string{"phase": "Rotating"}); n < 1 {
		t.Fatal("no Rotating phase duration observed")
	}
	assertNoSecretInMetrics(t, gen1["orders"], gen2["orders"])

	// A healthy second rotation: the acker's last ack (for the first
	// rotation's distribution) is still on the set when the hash changes.
	// That is stale, not a mistake: no Warning (an earlier rekey
	// reported it as AckIgnored on every rotation).
	since := time.Now()
	rotate(t, ns, "orders", "orders-2")
	waitPhase(t, ns, "orders", v1.PhaseIdle, 3)
	assertNoWarningSince(t, ns, "orders", since, "a healthy second rotation")
}
