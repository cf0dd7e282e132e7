package plugin

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestNextStepBackendsGroupsAndPolicies(t *testing.T) {
	now := time.Unix(1700000000, 0)
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(now.Add(d)); return &m }
	ceph := &v1.CephSpec{Entities: []v1.CephEntity{{Name: "client.csi"}}}
	overlap := &v1.CephSpec{Strategy: v1.CephOverlapping, Entities: []v1.CephEntity{{Name: "client.csi"}}}
	rabbit := &v1.RabbitMQSpec{User: v1.RabbitMQUser{Base: "nova"}}
	groups := []v1.ConsumerGroup{{Name: "compute", Members: []string{"c0", "c1", "c2"}}, {Name: "net", Members: []string{"n0"}}}
	day := &metav1.Duration{Duration: 24 * time.Hour}
	cases := []struct {
		name string
		spec v1.CredentialSetSpec
		st   v1.CredentialSetStatus
		want string
	}{
		{"ceph rotating", v1.CredentialSetSpec{Ceph: ceph}, v1.CredentialSetStatus{Phase: v1.PhaseRotating, KeyGeneration: 2}, "wait: applying new keys"},
		{"rabbitmq rotating", v1.CredentialSetSpec{RabbitMQ: rabbit}, v1.CredentialSetStatus{Phase: v1.PhaseRotating, KeyGeneration: 2}, "wait: creating the new user"},
		{"ceph reset", v1.CredentialSetSpec{Ceph: ceph}, v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2, ResetPending: true}, "wait: resetting Ceph to the current keys after the consumers rolled back"},
		{"ceph inplace discarding", v1.CredentialSetSpec{Ceph: ceph}, v1.CredentialSetStatus{Phase: v1.PhaseDistributed, DiscardApplied: true}, "wait: completing the rotation"},
		{"ceph overlapping discarding", v1.CredentialSetSpec{Ceph: overlap}, v1.CredentialSetStatus{Phase: v1.PhaseDistributed, DiscardApplied: true}, "wait: prior entities removed, completing the rotation"},
		{"rabbitmq discarding", v1.CredentialSetSpec{RabbitMQ: rabbit}, v1.CredentialSetStatus{Phase: v1.PhaseDistributed, DiscardApplied: true}, "wait: old user deleted, completing the rotation"},
		{"rabbitmq rolled out, manual", v1.CredentialSetSpec{RabbitMQ: rabbit}, v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RolledOutAt: at(0)},
			"verify, then kubectl rekey discard nova (the old user goes once every consumer of this set moved)"},
		{"rabbitmq rolled out, auto", v1.CredentialSetSpec{RabbitMQ: rabbit, ConsumerGroups: groups[:1], Rotation: v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout}},
			v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RolledOutAt: at(0), Consumers: []v1.ConsumerStatus{{Kind: v1.KindGroup, Name: groups[0].Name, RolledOut: true}}},
			"discard happens automatically (the old user is deleted once every consumer of this set moved)"},
		{"rabbitmq rolled out, auto but no consumer declared", v1.CredentialSetSpec{RabbitMQ: rabbit, Rotation: v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout}}, v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RolledOutAt: at(0)},
			"verify, then kubectl rekey discard nova (discardPolicy AfterRollout, but no consumer is declared, so the operator does not discard by itself)"},

		// Groups are consumers too: nothing is rolled out until they are.
		{"groups not reported yet", v1.CredentialSetSpec{RabbitMQ: rabbit, ConsumerGroups: groups[:1]}, v1.CredentialSetStatus{Phase: v1.PhaseDistributed},
			"wait for consumers to roll out (0/1); acknowledge updated members of group compute (0/3): kubectl rekey ack nova --group compute --members A,B"},
		{"one group waits", v1.CredentialSetSpec{RabbitMQ: rabbit, ConsumerGroups: groups}, v1.CredentialSetStatus{Phase: v1.PhaseDistributed, SecretHash: "h2", ConsumersUpdated: "1/2",
			Consumers: []v1.ConsumerStatus{
				{Kind: v1.KindGroup, Name: "compute", SecretHash: "h2", MembersUpdated: []string{"c0", "c2"}},
				{Kind: v1.KindGroup, Name: "net", SecretHash: "h2", MembersUpdated: []string{"n0"}, RolledOut: true}}},
			"wait for consumers to roll out (1/2); acknowledge updated members of group compute (2/3): kubectl rekey ack nova --group compute --members A,B"},
		{"acks for an older distribution do not count", v1.CredentialSetSpec{RabbitMQ: rabbit, ConsumerGroups: groups}, v1.CredentialSetStatus{Phase: v1.PhaseDistributed, SecretHash: "h2",
			Consumers: []v1.ConsumerStatus{{Kind: v1.KindGroup, Name: "net", SecretHash: "h1", MembersUpdated: []string{"n0"}}}},
			"wait for consumers to roll out (0/2); acknowledge updated members of groups compute (0/3), net (0/1): kubectl rekey ack nova --group GROUP --members A,B"},
		{"groups done, workload not", v1.CredentialSetSpec{RabbitMQ: rabbit, ConsumerGroups: groups[1:], Consumers: []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "api"}}},
			v1.CredentialSetStatus{Phase: v1.PhaseDistributed, SecretHash: "h", ConsumersUpdated: "1/2",
				Consumers: []v1.ConsumerStatus{{Kind: v1.KindGroup, Name: "net", SecretHash: "h", MembersUpdated: []string{"n0"}, RolledOut: true}}},
			"wait for consumers to roll out (1/2)"},

		// Policies say what starts the next rotation.
		{"schedule ahead", v1.CredentialSetSpec{Ceph: ceph, Rotation: v1.RotationSpec{Policy: v1.PolicySchedule, Interval: day}}, v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3, NextRotationAt: at(72 * time.Hour)},
			"rotate when needed; next scheduled rotation in 3d"},
		{"schedule due", v1.CredentialSetSpec{Ceph: ceph, Rotation: v1.RotationSpec{Policy: v1.PolicySchedule, Interval: day}}, v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3, NextRotationAt: at(-time.Minute)},
			"wait: the scheduled rotation is due; the operator starts it"},
		{"schedule not computed yet", v1.CredentialSetSpec{Ceph: ceph, Rotation: v1.RotationSpec{Policy: v1.PolicySchedule, Interval: day}}, v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3},
			"rotate when needed; policy Schedule rotates every 24h"},
		{"keyGeneration asks", v1.CredentialSetSpec{Ceph: ceph, Rotation: v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: ptr.To(int64(5))}}, v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3},
			"wait: spec.rotation.keyGeneration 5 asks for a rotation; the operator starts it"},
		{"keyGeneration reached", v1.CredentialSetSpec{Ceph: ceph, Rotation: v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: ptr.To(int64(3))}}, v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3},
			"rotate when needed, or raise spec.rotation.keyGeneration above 3"},
		{"keyGeneration rolled back", v1.CredentialSetSpec{Ceph: ceph, Rotation: v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: ptr.To(int64(5))}}, v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3, LastRolledBackID: "keygeneration-5"},
			"rotate when needed; the rotation to spec.rotation.keyGeneration 5 was rolled back: raise it to ask again"},
		{"version upgrade", v1.CredentialSetSpec{Ceph: ceph, Rotation: v1.RotationSpec{Policy: v1.PolicyWithVersionUpgrade}}, v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3, KeyVersion: "20.2.0"},
			"rotate when needed; the operator also rotates once Ceph runs a version newer than 20.2.0"},
		{"version unknown", v1.CredentialSetSpec{RabbitMQ: rabbit, Rotation: v1.RotationSpec{Policy: v1.PolicyWithVersionUpgrade}}, v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3},
			"rotate when needed; the operator also rotates when RabbitMQ is upgraded"},
		{"disabled", v1.CredentialSetSpec{RabbitMQ: rabbit, Rotation: v1.RotationSpec{Policy: v1.PolicyDisabled}}, v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3}, "rotate when needed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The operator records Distributed only once phase 1 applied.
			c.st.RotateApplied = c.st.RotateApplied || c.st.Phase == v1.PhaseDistributed
			cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "nova"}, Spec: c.spec, Status: c.st}
			if got := nextStep(cs, now); got != c.want {
				t.Errorf("nextStep = %q\nwant        %q", got, c.want)
			}
		})
	}
}

// The status table shows the same next step, at the time it runs.
func TestStatusShowsScheduleAndAck(t *testing.T) {
	ns := namespace(t)
	cs := rabbitSet(ns, "nova")
	cs.Spec.Consumers = nil
	create(t, cs)
	setStatus(t, ns, "nova", func(st *v1.CredentialSetStatus) {
		distributed("r-2")(st)
		st.KeyGeneration, st.SecretHash, st.ConsumersUpdated = 1, "h2", "0/1"
		st.Consumers = []v1.ConsumerStatus{{Kind: v1.KindGroup, Name: "edpm-compute", SecretHash: "h2", MembersUpdated: []string{"compute-1"}}}
	})
	ceph := cephSet(ns, "csi", v1.CephInPlace, "mgr.a")
	ceph.Spec.Rotation = v1.RotationSpec{Policy: v1.PolicySchedule, Interval: &metav1.Duration{Duration: 720 * time.Hour}}
	create(t, ceph)
	next := metav1.NewTime(time.Now().Add(50*time.Hour + 30*time.Minute))
	setStatus(t, ns, "csi", func(st *v1.CredentialSetStatus) { idle(3)(st); st.NextRotationAt = &next })

	out, _, err := kubectl(t, ns, "status")
	if err != nil {
		t.Fatal(err)
	}
	r := rows(out)
	if len(r) != 3 || r[1][0] != "csi" || r[2][0] != "nova" {
		t.Fatalf("status:\n%s", out)
	}
	if got := r[1][len(r[1])-1]; got != "rotate when needed; next scheduled rotation in 2d2h" {
		t.Errorf("csi next step %q", got)
	}
	// The table keeps the next step short; -v has it in full.
	if got := strings.Join(r[2][6:], " | "); got != "0/1 members 1/3 | - | wait for consumers to roll out (0/1); acknowledge updated … (-v: in full)" {
		t.Errorf("nova consumers, event and next step: %q\n%s", got, out)
	}
	out, _, err = kubectl(t, ns, "status", "nova", "-v")
	if err != nil {
		t.Fatal(err)
	}
	if want := "  next step: wait for consumers to roll out (0/1); acknowledge updated members of group edpm-compute (1/3): kubectl rekey ack nova --group edpm-compute --members A,B\n"; !strings.Contains(out, want) {
		t.Errorf("status -v nova lacks %q:\n%s", want, out)
	}
}
