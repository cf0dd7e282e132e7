package controller

import (
	"strings"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestWindDownDeadline(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	const timeout = 10 * time.Minute
	cases := []struct {
		name       string
		ns         namespaceDeletion
		setDeleted time.Time
		want       time.Time
	}{
		{"a namespace not being deleted: no deadline, the set waits as long as it fails",
			namespaceDeletion{}, t0, time.Time{}},
		{"deleted with its namespace: timeout after the namespace's deletion",
			namespaceDeletion{terminating: true, since: t0}, t0.Add(time.Second), t0.Add(time.Second + timeout)},
		{"a set deleted long before its namespace gets the whole timeout from the namespace's deletion",
			namespaceDeletion{terminating: true, since: t0}, t0.Add(-time.Hour), t0.Add(timeout)},
		{"a namespace gone already: timeout after the set's deletion",
			namespaceDeletion{terminating: true}, t0, t0.Add(timeout)},
	}
	for _, c := range cases {
		if got := windDownDeadline(c.ns, c.setDeleted, timeout); !got.Equal(c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestLeftValid(t *testing.T) {
	mysql := v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{Users: []v1.MySQLUser{{Name: "app"}, {Name: "report"}}}}
	ceph := v1.CredentialSetSpec{Ceph: &v1.CephSpec{Strategy: v1.CephOverlapping, Entities: []v1.CephEntity{{Name: "client.csi"}}}}
	rabbit := v1.CredentialSetSpec{RabbitMQ: &v1.RabbitMQSpec{User: v1.RabbitMQUser{Base: "nova"}}}
	pg := v1.CredentialSetSpec{Postgres: &v1.PostgresSpec{Logins: []v1.PostgresLogin{{Base: "app"}, {Base: "report"}}}}
	idle := v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3}
	distributed := v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotationID: "r7", KeyGeneration: 3}
	cases := []struct {
		name   string
		spec   v1.CredentialSetSpec
		st     v1.CredentialSetStatus
		policy v1.DeletionPolicy
		want   []string
	}{
		{"mid-rotation: both credentials", mysql, distributed, v1.DeletionDiscard,
			[]string{"rotation r7 was in flight", "MySQL users app, report", "both the old and the new", "source Secret keeps"}},
		{"Discard: current and priors", ceph, idle, v1.DeletionDiscard,
			[]string{"Ceph entities client.csi (and their generations", "current credentials", "prior generation"}},
		{"Delete: nothing deleted", rabbit, idle, v1.DeletionDelete,
			[]string{"RabbitMQ users nova-g<N> were not deleted"}},
		{"PostgreSQL logins of every base", pg, idle, v1.DeletionDiscard,
			[]string{"PostgreSQL logins app_g<N>, report_g<N>"}},
	}
	for _, c := range cases {
		got := leftValid(&v1.CredentialSet{Spec: c.spec, Status: c.st}, c.policy)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", c.name, got, w)
			}
		}
	}
}
