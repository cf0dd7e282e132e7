package plugin

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// renderNow is the clock of the renderer tests.
var renderNow = time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)

func mysqlSet(ns, name string, st v1.CredentialSetStatus) v1.CredentialSet {
	cs := hostsSet(ns, name)
	cs.Status = st
	return *cs
}

func until(d time.Duration) *metav1.Time { m := metav1.NewTime(renderNow.Add(d)); return &m }

// TestWaitWords: each wait status.waiting can hold is said with its
// deadline, short for the table and in full for -v.
func TestWaitWords(t *testing.T) {
	reset := v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3, ResetPending: true, ConsumersUpdated: "1/1", LastRolledBackID: "r4"}
	dist := v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r4", KeyGeneration: 3, RotateApplied: true, ConsumersUpdated: "0/1"}
	with := func(st v1.CredentialSetStatus, w v1.WaitStatus) v1.CredentialSetStatus { st.Waiting = &w; return st }
	for _, tc := range []struct {
		name         string
		st           v1.CredentialSetStatus
		step, detail string
	}{
		{"reset after the rollback's rollout", with(reset, v1.WaitStatus{For: v1.WaitResetGracePeriod, Until: until(4*time.Minute + 12*time.Second)}),
			"wait: reset in 4m12s: gracePeriod after the rollback's rollout",
			"until 2026-11-29 07:04:12 UTC (in 4m12s): gracePeriod (the manager's --default-grace-period, 5m unless set otherwise) after the rollback's rollout, for consumers rekey cannot watch; then MySQL is reset to the current passwords"},
		{"reset due", with(reset, v1.WaitStatus{For: v1.WaitResetGracePeriod, Until: until(-time.Second)}),
			"wait: reset due now: gracePeriod after the rollback's rollout",
			"until 2026-11-29 06:59:59 UTC (passed: the operator acts on its next look): gracePeriod"},
		{"rollback's rollout", with(reset, v1.WaitStatus{For: v1.WaitRollback}),
			"wait: consumers roll back (1/1); then gracePeriod, then the MySQL reset",
			"no deadline: the consumers roll back onto the current credentials (1/1); then gracePeriod"},
		{"rollout", with(dist, v1.WaitStatus{For: v1.WaitRollout}),
			"wait for consumers to roll out (0/1)",
			"no deadline: the consumers roll out the new credentials (0/1); the discard waits for them"},
		{"AfterRollout's grace period", func() v1.CredentialSetStatus {
			s := with(dist, v1.WaitStatus{For: v1.WaitGracePeriod, Until: until(90 * time.Second)})
			s.ConsumersUpdated, s.RolledOutAt = "1/1", until(-time.Minute)
			return s
		}(),
			"wait: discard in 1m30s: gracePeriod after the rollout",
			"until 2026-11-29 07:01:30 UTC (in 90s): gracePeriod (2m30s) after the rollout"},
		{"a window", with(v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3}, v1.WaitStatus{For: v1.WaitMaintenanceWindow, Until: until(19 * time.Hour)}),
			"wait: the scheduled rotation starts in 19h0m0s: its maintenance window opens",
			"until 2026-11-30 02:00:00 UTC (in 19h): the scheduled rotation is due"},
	} {
		cs := mysqlSet("shop", "orders", tc.st)
		step, ok := waitStep(&cs, renderNow)
		if !ok || step != tc.step {
			t.Errorf("%s: waitStep = %q, %v; want %q", tc.name, step, ok, tc.step)
		}
		if d := waitDetail(&cs, renderNow); !strings.HasPrefix(d, tc.detail) {
			t.Errorf("%s: waitDetail = %q, want it to start %q", tc.name, d, tc.detail)
		}
		if tc.st.ResetPending || tc.st.Waiting.For == v1.WaitGracePeriod {
			if got := nextStep(&cs, renderNow); got != tc.step {
				t.Errorf("%s: nextStep = %q, want the wait %q", tc.name, got, tc.step)
			}
		}
		if tc.st.Waiting.Until != nil && tc.st.Waiting.Until.After(renderNow) {
			line := progressLine(&cs, renderNow)
			if !strings.Contains(line, strings.TrimPrefix(tc.step, "wait: ")+" (at "+tc.st.Waiting.Until.UTC().Format("15:04:05 MST")+")") {
				t.Errorf("%s: --wait's line %q lacks the wait and its deadline", tc.name, line)
			}
		}
	}
}

// TestStatusTablePrints: the table goes through cli-runtime's printer:
// --no-headers, -A's NAMESPACE, -o wide's columns, -L's label columns.
func TestStatusTablePrints(t *testing.T) {
	a := mysqlSet("shop", "a", v1.CredentialSetStatus{Phase: v1.PhaseIdle, Step: "Idle", KeyGeneration: 3, CurrentSince: until(-5 * time.Hour), ConsumersUpdated: "1/1", LastRotationID: "r3"})
	a.Labels = map[string]string{"team": "pay"}
	b := mysqlSet("ops", "b", v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, ResetPending: true, ConsumersUpdated: "1/1", LastRolledBackID: "r9",
		Waiting: &v1.WaitStatus{For: v1.WaitResetGracePeriod, Until: until(4*time.Minute + 12*time.Second)}})
	b.Labels = map[string]string{"team": "ops"}
	evs := []eventsv1.Event{{Regarding: corev1.ObjectReference{APIVersion: v1.GroupVersion.String(), Kind: "CredentialSet", Namespace: "shop", Name: "a"}, Reason: "RotationCompleted", EventTime: metav1.NewMicroTime(renderNow)}}
	print := func(o printers.PrintOptions) string {
		var buf bytes.Buffer
		if err := printers.NewTablePrinter(o).PrintObj(statusTable([]v1.CredentialSet{a, b}, evs, renderNow), &buf); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	for _, tc := range []struct {
		name string
		o    printers.PrintOptions
		want [][]string
	}{
		{"the table", printers.PrintOptions{}, [][]string{
			{"NAME", "PHASE", "STEP", "GENERATION", "ROTATION", "AGE", "CONSUMERS", "LAST EVENT", "NEXT STEP"},
			{"a", "Idle", "Idle", "3", "-", "5h", "1/1", "RotationCompleted", "rotate when needed"},
			{"b", "Idle", "-", "2", "-", "-", "1/1", "-", "wait: reset in 4m12s: gracePeriod after the rollback's rollout"}}},
		{"--no-headers -A", printers.PrintOptions{NoHeaders: true, WithNamespace: true}, [][]string{
			{"shop", "a", "Idle", "Idle", "3", "-", "5h", "1/1", "RotationCompleted", "rotate when needed"},
			{"ops", "b", "Idle", "-", "2", "-", "-", "1/1", "-", "wait: reset in 4m12s: gracePeriod after the rollback's rollout"}}},
		{"-o wide -L team", printers.PrintOptions{Wide: true, ColumnLabels: []string{"team"}}, [][]string{
			{"NAME", "PHASE", "STEP", "GENERATION", "ROTATION", "AGE", "CONSUMERS", "LAST EVENT", "NEXT STEP", "BACKEND", "DISCARD", "LAST ROTATION", "TEAM"},
			{"a", "Idle", "Idle", "3", "-", "5h", "1/1", "RotationCompleted", "rotate when needed", "MySQL", "Manual", "r3", "pay"},
			{"b", "Idle", "-", "2", "-", "-", "1/1", "-", "wait: reset in 4m12s: gracePeriod after the rollback's rollout", "MySQL", "Manual", "-", "ops"}}},
	} {
		out := print(tc.o)
		if got := rows(out); !equalRows(got, tc.want) {
			t.Errorf("%s:\n%s\ncells %q\nwant  %q", tc.name, out, got, tc.want)
		}
	}
}

// TestCustomColumns: kubectl's custom-columns, relaxed paths included,
// <none> for what a set lacks.
func TestCustomColumns(t *testing.T) {
	a := mysqlSet("shop", "a", v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3})
	b := mysqlSet("shop", "b", v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, Waiting: &v1.WaitStatus{For: v1.WaitResetGracePeriod, Until: until(time.Minute)}})
	c, err := parseCustomColumns("custom-columns=NAME:.metadata.name,GEN:status.keyGeneration,WAITS:{.status.waiting.for},UNTIL:.status.waiting.until")
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c.table(setObjects([]v1.CredentialSet{a, b}))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(tbl, &buf); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"NAME", "GEN", "WAITS", "UNTIL"}, {"a", "3", "<none>", "<none>"}, {"b", "2", "ResetGracePeriod", "2026-11-29T07:01:00Z"}}
	if got := rows(buf.String()); !equalRows(got, want) {
		t.Errorf("custom columns:\n%s\ncells %q\nwant  %q", buf.String(), got, want)
	}
	for _, bad := range []string{"custom-columns=", "custom-columns=NAME", "custom-columns=NAME:.metadata.name,:x", "custom-columns=X:.a[", "custom-columns=X:{.a}}"} {
		if _, err := parseCustomColumns(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

// TestAcceptedGenerations: what the backend accepts at each point of a
// rotation, as the status records it.
func TestAcceptedGenerations(t *testing.T) {
	for _, tc := range []struct {
		st   v1.CredentialSetStatus
		want string
	}{
		{v1.CredentialSetStatus{Phase: v1.PhasePending}, "nothing yet: generation 1 is not provisioned"},
		{v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3}, "generation 3"},
		{v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r", KeyGeneration: 3}, "generation 3 (generation 4 is being applied)"},
		{v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r", KeyGeneration: 3, RotateApplied: true}, "generations 3 and 4"},
		{v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r", KeyGeneration: 3, RotateApplied: true, DiscardStarted: true}, "generation 4 (generation 3 is being retired)"},
		{v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r", KeyGeneration: 3, RotateApplied: true, DiscardStarted: true, DiscardApplied: true}, "generation 4 only"},
		{v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3, ResetPending: true}, "generation 3, and whatever the rolled-back rotation applied until the reset"},
	} {
		cs := mysqlSet("shop", "orders", tc.st)
		if got := acceptedGenerations(&cs); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.st, got, tc.want)
		}
	}
}

// TestCheckedTargets: status.check's findings sorted into instances and
// users for -v; the set's and the consumers' own are left out.
func TestCheckedTargets(t *testing.T) {
	fs := []v1.CheckFinding{
		{Target: "db-1:3306", Check: "reachable", Message: "connection refused", Fix: "open port 3306"},
		{Target: "db-0:3306", Check: "reachable", OK: true, Message: "MySQL answers at db-0:3306"},
		{Target: "db-0:3306", Check: "version", OK: true, Message: "MySQL 8.4.3"},
		{Target: "db-0:3306", Check: "user orders@%", OK: true},
		{Target: "db-0:3306", Check: "privileges", Message: "missing CREATE USER"},
		{Target: "Deployment shop/api", Check: "consumer", OK: true},
		{Target: "spec.mysql.instances", Check: "instances", OK: true},
	}
	inst, users := checkedTargets(fs)
	want := []checked{
		{"db-1:3306", []string{"reachable FAILED: connection refused (fix: open port 3306)"}},
		{"db-0:3306", []string{"reachable ok", "MySQL 8.4.3", "privileges FAILED: missing CREATE USER"}},
	}
	if len(inst) != len(want) || len(users) != 1 || users[0].name != "user orders@%" || users[0].found[0] != "on db-0:3306 ok" {
		t.Fatalf("instances %q users %q", inst, users)
	}
	for i := range want {
		if inst[i].name != want[i].name || strings.Join(inst[i].found, "|") != strings.Join(want[i].found, "|") {
			t.Errorf("instance %d: %q, want %q", i, inst[i], want[i])
		}
	}
}

func equalRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], "|") != strings.Join(b[i], "|") {
			return false
		}
	}
	return true
}
