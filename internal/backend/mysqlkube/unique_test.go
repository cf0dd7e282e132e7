package mysqlkube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
)

// setsKube lists sets; uniqueUsers calls nothing else (the nil embedded
// interface panics on any other call).
type setsKube struct {
	registry.Kube
	sets []v1.CredentialSet
}

func (k *setsKube) Sets(context.Context) ([]v1.CredentialSet, error) { return k.sets, nil }

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// mysqlSet is a set in ns rotating users on hosts, created at t0 plus
// created seconds, at generation gen (0: never provisioned).
func mysqlSet(ns, name string, created int, gen int64, hosts []string, admin string, users ...string) v1.CredentialSet {
	cs := v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name),
		CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(created) * time.Second))}}
	cs.Spec.MySQL = &v1.MySQLSpec{Instances: v1.MySQLInstances{Hosts: hosts}, Admin: v1.MySQLAdmin{User: admin}}
	for _, u := range users {
		cs.Spec.MySQL.Users = append(cs.Spec.MySQL.Users, v1.MySQLUser{Name: u})
	}
	cs.Status.KeyGeneration = gen
	return cs
}

// TestUniqueUsers: of two sets on the same instances that would break each
// other, the one that provisioned (of two that did, the older) keeps its
// users and the other is refused with a spec error naming the first.
func TestUniqueUsers(t *testing.T) {
	db := []string{"db-0.example:3306", "db-1.example:3306"}
	other := []string{"elsewhere.example:3306"}
	sts := func(cs v1.CredentialSet) v1.CredentialSet {
		cs.Spec.MySQL.Instances = v1.MySQLInstances{StatefulSet: &v1.StatefulSetInstances{Name: "db", ServiceName: "db"}}
		return cs
	}
	mocoOn := func(cs v1.CredentialSet, cluster string) v1.CredentialSet {
		cs.Spec.MySQL = &v1.MySQLSpec{MOCO: &v1.MOCOSpec{ClusterName: cluster}}
		return cs
	}
	being := func(cs v1.CredentialSet) v1.CredentialSet {
		cs.DeletionTimestamp = &metav1.Time{Time: t0.Add(time.Hour)}
		return cs
	}
	for _, tc := range []struct {
		name   string
		others []v1.CredentialSet
		cs     v1.CredentialSet
		want   []string // nil: not refused
	}{
		{"a provisioned set keeps a user", []v1.CredentialSet{mysqlSet("a", "first", 0, 2, db, "ops", "app")},
			mysqlSet("a", "second", 10, 0, db, "ops", "app"),
			[]string{"CredentialSet a/first is on the same MySQL instances", "user app@%", "Remove app@% from spec.mysql.users", "This set changed nothing"}},
		{"a set in another namespace is not named", []v1.CredentialSet{mysqlSet("a", "first", 0, 2, db, "ops", "app")},
			mysqlSet("b", "second", 10, 0, db[1:], "ops", "app"),
			[]string{"a CredentialSet in another namespace", "user app@%"}},
		{"the admin of a provisioned set", []v1.CredentialSet{mysqlSet("a", "first", 0, 1, db, "root", "app")},
			mysqlSet("b", "second", 10, 0, db, "ops", "root"),
			[]string{"it connects as root", "Remove root@% from spec.mysql.users"}},
		{"a newcomer never stops a set that provisioned", []v1.CredentialSet{mysqlSet("a", "newer", 10, 0, db, "ops", "app")},
			mysqlSet("a", "working", 0, 1, db, "ops", "app"), nil},
		{"of two provisioned sets the older keeps", []v1.CredentialSet{mysqlSet("a", "older", 0, 3, db, "ops", "app")},
			mysqlSet("a", "younger", 10, 1, db, "ops", "app"), []string{"CredentialSet a/older"}},
		{"the younger of two provisioned sets stops nothing", []v1.CredentialSet{mysqlSet("a", "younger", 10, 1, db, "ops", "app")},
			mysqlSet("a", "older", 0, 3, db, "ops", "app"), nil},
		{"created in the same second: by name", []v1.CredentialSet{mysqlSet("a", "x", 0, 1, db, "ops", "app")},
			mysqlSet("a", "y", 0, 1, db, "ops", "app"), []string{"CredentialSet a/x"}},
		{"neither provisioned: no squatting", []v1.CredentialSet{mysqlSet("a", "first", 0, 0, db, "ops", "app")},
			mysqlSet("b", "second", 10, 0, db, "ops", "app"), nil},
		{"other instances", []v1.CredentialSet{mysqlSet("a", "first", 0, 2, other, "ops", "app")},
			mysqlSet("a", "second", 10, 0, db, "ops", "app"), nil},
		{"other users on the same instances", []v1.CredentialSet{mysqlSet("a", "first", 0, 2, db, "ops", "app")},
			mysqlSet("a", "second", 10, 0, db, "ops", "web"), nil},
		{"a StatefulSet and its pods' addresses are the same instances",
			[]v1.CredentialSet{sts(mysqlSet("a", "first", 0, 1, nil, "ops", "app"))},
			mysqlSet("b", "second", 10, 0, []string{"db-2.db.a.svc:3306"}, "ops", "app"), []string{"user app@%"}},
		{"two moco sets on one MySQLCluster", []v1.CredentialSet{mocoOn(mysqlSet("a", "first", 0, 1, nil, ""), "shop")},
			mocoOn(mysqlSet("a", "second", 10, 0, nil, ""), "shop"), []string{"user moco-admin@%", "delete one of the two sets"}},
		{"moco sets on two MySQLClusters", []v1.CredentialSet{mocoOn(mysqlSet("a", "first", 0, 1, nil, ""), "shop")},
			mocoOn(mysqlSet("a", "second", 10, 0, nil, ""), "blog"), nil},
		{"a never-provisioned set being deleted is let go", []v1.CredentialSet{mysqlSet("a", "first", 0, 2, db, "ops", "app")},
			being(mysqlSet("a", "second", 10, 0, db, "ops", "app")), nil},
		{"a provisioned set being deleted is still refused", []v1.CredentialSet{mysqlSet("a", "first", 0, 2, db, "ops", "app")},
			being(mysqlSet("a", "second", 10, 1, db, "ops", "app")), []string{"user app@%"}},
	} {
		cs := tc.cs
		k := &setsKube{sets: append(append([]v1.CredentialSet{}, tc.others...), cs)}
		err := uniqueUsers(context.Background(), k, &cs)
		var se *registry.SpecError
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != nil && !errors.As(err, &se):
			t.Errorf("%s: got %v, want a spec error", tc.name, err)
		case tc.want != nil:
			for _, w := range tc.want {
				if !strings.Contains(se.Msg, w) {
					t.Errorf("%s: %q does not say %q", tc.name, se.Msg, w)
				}
			}
		}
	}
}
