package e2e

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// managerServiceAccount is the identity the shipped kustomize install runs
// the manager as, and the only one the shipped status policy lets write a
// set's status.
const managerServiceAccount = "system:serviceaccount:" + OperatorNamespace + ":rekey-controller-manager"

// asManagerServiceAccount is cfg acting as the installed manager's
// ServiceAccount (with the admin's group, so RBAC is not what is tested).
func asManagerServiceAccount(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: managerServiceAccount,
		Groups: []string{"system:masters", "system:serviceaccounts", "system:authenticated"}}
	return c
}

// shippedUserRoles creates the ClusterRoles of config/rbac/user_roles.yaml
// (rekey-edit, rekey-view) as an install would.
func shippedUserRoles(t *testing.T) {
	t.Helper()
	objs, err := env.Manifests("config/rbac/user_roles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if err := k8s.Create(ctxT(t), u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// boundClient is a client acting as user, bound in ns to the ClusterRole
// role, or to a Role with rules when rules are given.
func boundClient(t *testing.T, user, ns, role string, rules ...rbacv1.PolicyRule) client.Client {
	t.Helper()
	ctx := ctxT(t)
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
	if len(rules) > 0 {
		if err := k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role}, Rules: rules}); err != nil {
			t.Fatal(err)
		}
		ref.Kind = "Role"
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, RoleRef: ref,
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
	if err := k8s.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	return impersonating(t, user)
}

// countingListener accepts and closes connections, counting them: an
// endpoint of the tenant's that must never see rekey.
func countingListener(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), &n
}

// TestTenantReadsAndStatus: with the shipped admission policies, a set
// reads and touches only what its author may read and touch, and only rekey
// writes a set's status. Tenants: one bound to the shipped rekey-edit role
// alone (no Secret rights), one with a namespace editor's rights (sets,
// Secrets, Deployments), and one with those plus every right on rekey.io
// (so on credentialsets/status). The manager runs as the installed
// ServiceAccount, so the status policy is tested as shipped.
func TestTenantReadsAndStatus(t *testing.T) {
	ns := newNamespace(t)
	shippedUserRoles(t)
	setsOnly := boundClient(t, "tenant-sets-only", ns, "rekey-edit")
	editor := tenantClient(t, "tenant-editor", ns)
	statusWriter := boundClient(t, "tenant-rekey-star", ns, "tenant-rekey-star",
		rbacv1.PolicyRule{APIGroups: []string{"rekey.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}})
	startManager(t, asManagerServiceAccount(cp.Config))
	installNamespacePolicy(t, editor, ns)
	ctx := ctxT(t)
	createSecret(t, ns, "db-admin", map[string]string{"password": "canary-admin-password", "keyring": "[client.admin]\n\tkey = canary\n", "username": "admin"})
	addr, reached := countingListener(t)

	var rows []attackRow
	refused := func(attack string, err error, want ...string) {
		t.Helper()
		if err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("%s: admission answered %v; want a refusal", attack, err)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the refusal does not name %q: %v", attack, w, err)
			}
		}
		rows = append(rows, attackRow{attack, "admission: " + firstLine(err.Error()), "nothing created or changed"})
	}

	// Reading: each backend's admin Secret, named by someone who may not
	// read it, with an endpoint of hers.
	mysqlHarvest := unreachableSet(ns, "read-mysql", nil, nil)
	mysqlHarvest.Spec.MySQL.Instances.Hosts = []string{addr}
	mysqlHarvest.Spec.MySQL.Admin.PasswordSecretRef = &v1.SecretKeyRef{Name: "db-admin", Key: "password"}
	mysqlHarvest.Spec.MySQL.AdoptSecretRef = &v1.LocalSecretRef{Name: "db-admin"}
	refused("rekey-edit alone: mysql admin, adopt Secrets it may not read, its own endpoint", setsOnly.Create(ctx, mysqlHarvest),
		"spec.mysql.admin.passwordSecretRef (Secret db-admin)", "spec.mysql.adoptSecretRef (Secret db-admin)", "may not get")
	rabbitHarvest := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-rabbitmq"}, Spec: v1.CredentialSetSpec{
		RabbitMQ: &v1.RabbitMQSpec{Endpoint: "http://" + addr, AllowPlaintextHTTP: true,
			Admin: v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "db-admin"}}, User: v1.RabbitMQUser{Base: "app"}}}}
	refused("rekey-edit alone: rabbitmq admin Secret it may not read, its own endpoint", setsOnly.Create(ctx, rabbitHarvest),
		"spec.rabbitmq.admin.secretRef (Secret db-admin)")
	cephHarvest := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-ceph"}, Spec: v1.CredentialSetSpec{
		Ceph: &v1.CephSpec{Monitors: []string{addr}, Admin: v1.CephAdmin{KeyringSecretRef: v1.SecretKeyRef{Name: "db-admin", Key: "keyring"}},
			Entities: []v1.CephEntity{{Name: "client.app"}}}}}
	refused("rekey-edit alone: ceph admin keyring it may not read, its own monitor", setsOnly.Create(ctx, cephHarvest),
		"spec.ceph.admin.keyringSecretRef (Secret db-admin)")

	pgHarvest := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-postgres"}, Spec: v1.CredentialSetSpec{
		Postgres: &v1.PostgresSpec{Hosts: []string{addr}, TLS: "Disable",
			Admin: v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "db-admin"}},
			Login: v1.PostgresLogin{Base: "app", Group: "app_owner"},
			Adopt: &v1.PostgresAdopt{Role: "legacy", PasswordSecretRef: v1.SecretKeyRef{Name: "db-admin", Key: "password"}}}}}
	refused("rekey-edit alone: postgres admin and adoption Secrets it may not read, its own endpoint", setsOnly.Create(ctx, pgHarvest),
		"spec.postgres.admin.secretRef (Secret db-admin)", "spec.postgres.adopt.passwordSecretRef (Secret db-admin)")
	pgLogins := pgHarvest.DeepCopy()
	pgLogins.Name, pgLogins.Spec.Postgres.Adopt, pgLogins.Spec.Postgres.Login = "read-postgres-logins", nil, v1.PostgresLogin{}
	pgLogins.Spec.Postgres.Logins = []v1.PostgresLogin{{Base: "app", Group: "app_owner"},
		{Base: "report", Group: "report_reader", Adopt: &v1.PostgresAdopt{Role: "legacy", PasswordSecretRef: v1.SecretKeyRef{Name: "db-admin", Key: "password"}}}}
	refused("rekey-edit alone: a postgres login's adoption Secret it may not read", setsOnly.Create(ctx, pgLogins),
		"spec.postgres.logins.adopt.passwordSecretRef (Secret db-admin)")

	// Touching: a distribution Secret and a consumer of its own namespace
	// it may not write nor patch.
	refused("rekey-edit alone: a distribution Secret of its namespace", setsOnly.Create(ctx, unreachableSetNoAdmin(ns, "touch-dist", []v1.SecretTarget{{Namespace: ns, Name: "app-db"}}, nil)),
		"spec.distribution")
	victimDeployment(t, ns, "web")
	refused("rekey-edit alone: a consumer Deployment of its namespace", setsOnly.Create(ctx, unreachableSetNoAdmin(ns, "touch-cons", nil, []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "web"}})),
		"spec.consumers: tenant-sets-only may not patch all of Deployment "+ns+"/web")

	// The editor may read db-admin: the same set is hers to make, and the
	// manager (the installed ServiceAccount) reports on it in its status.
	legit := unreachableSet(ns, "legit", nil, nil)
	legit.Spec.MySQL.Admin.PasswordSecretRef = &v1.SecretKeyRef{Name: "db-admin", Key: "password"}
	if err := editor.Create(ctx, legit); err != nil {
		t.Fatalf("the editor's own set: %v", err)
	}
	waitDegraded(t, ns, "legit", reason.InstanceUnreachable)

	// Updating: the rekey-edit user may change what needs no right (when
	// a rotation counts as stuck) but not point the set at another Secret.
	eventually(t, time.Minute, "a spec edit that names nothing new to be admitted", func() (bool, string) {
		cs := getSet(t, ns, "legit")
		cs.Spec.Rotation.StuckAfter = &metav1.Duration{Duration: 2 * time.Hour}
		err := setsOnly.Update(ctx, cs)
		return err == nil, "update: " + errString(err)
	})
	createSecret(t, ns, "db-ca", map[string]string{"ca.crt": "not a certificate"})
	refused("rekey-edit alone: an update adding a Secret it may not read", updateUntilNoConflict(t, setsOnly, ns, "legit", func(cs *v1.CredentialSet) {
		cs.Spec.MySQL.TLSCASecretRef = &v1.SecretKeyRef{Name: "db-ca", Key: "ca.crt"}
		cs.Spec.MySQL.TLS = "Required"
	}), "spec.mysql.tlsCASecretRef (Secret db-ca)")

	// Forged status: a tenant with every right on rekey.io claims the
	// rotation is distributed and its discard started.
	var err error
	eventually(t, time.Minute, "a status write the API server answers", func() (bool, string) {
		forged := getSet(t, ns, "legit")
		forged.Status.Phase = v1.PhaseDistributed
		forged.Status.RotationID = "forged"
		forged.Status.DiscardStarted = true
		err = statusWriter.Status().Update(ctx, forged)
		return !apierrors.IsConflict(err), errString(err)
	})
	refused("rekey.io *: write a set's status (phase Distributed, discard started)", err, "only rekey ("+managerServiceAccount+") writes")
	if after := getSet(t, ns, "legit"); after.Status.Phase == v1.PhaseDistributed || after.Status.RotationID == "forged" || after.Status.DiscardStarted {
		t.Errorf("forged status took: %s", stateOf(after))
	}

	// Bounded: a list over its limit is refused with the limit.
	big := unreachableSet(ns, "too-many", nil, nil)
	big.Spec.MySQL.Admin.PasswordSecretRef = &v1.SecretKeyRef{Name: "db-admin", Key: "password"}
	for i := 0; len(big.Spec.MySQL.Instances.Hosts) <= 64; i++ {
		big.Spec.MySQL.Instances.Hosts = append(big.Spec.MySQL.Instances.Hosts, "db-"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26))+":3306")
	}
	refused("65 instances (the limit is 64)", editor.Create(ctx, big), "spec.mysql.instances.hosts", "64")
	long := unreachableSet(ns, "too-long", nil, nil)
	long.Spec.MySQL.Admin.PasswordSecretRef = &v1.SecretKeyRef{Name: strings.Repeat("a", 254), Key: "password"}
	refused("a Secret name of 254 characters (the limit is 253)", editor.Create(ctx, long), "spec.mysql.admin.passwordSecretRef.name", "253")

	for _, name := range []string{"read-mysql", "read-rabbitmq", "read-ceph", "read-postgres", "read-postgres-logins", "touch-dist", "touch-cons", "too-many", "too-long"} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v1.CredentialSet{}); !apierrors.IsNotFound(err) {
			t.Errorf("set %s exists (%v) though it was refused", name, err)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the tenant's endpoint was reached %d times", n)
	}
	t.Logf("\n%s", attackTable(rows))
	if len(rows) != 11 {
		t.Errorf("%d attacks refused, want 11", len(rows))
	}
}

// unreachableSetNoAdmin is unreachableSet without a Secret to read, so only
// what it writes or restarts is at stake.
func unreachableSetNoAdmin(ns, name string, dist []v1.SecretTarget, cons []v1.ConsumerRef) *v1.CredentialSet {
	cs := unreachableSet(ns, name, dist, cons)
	cs.Spec.MySQL.Admin.PasswordSecretRef = nil
	cs.Spec.MySQL.Users = []v1.MySQLUser{{Name: "ops-admin"}}
	return cs
}

// updateUntilNoConflict applies change to the newest copy of the set as c,
// again while the manager's own writes make it conflict, and returns the
// answer.
func updateUntilNoConflict(t *testing.T, c client.Client, ns, name string, change func(*v1.CredentialSet)) error {
	t.Helper()
	var err error
	eventually(t, time.Minute, "an update the API server answers", func() (bool, string) {
		cs := getSet(t, ns, name)
		change(cs)
		err = c.Update(ctxT(t), cs)
		return !apierrors.IsConflict(err), errString(err)
	})
	return err
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
