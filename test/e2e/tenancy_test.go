package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// tenantUser is the impersonated tenant: RBAC allows CredentialSets,
// Secrets and Deployments in its own namespace, nothing else.
const tenantUser = "tenant-alice"

// attackRow is one line of the table the suite prints.
type attackRow struct{ attack, refused, evidence string }

// tenantClient is a client acting as user, with a Role in each namespace
// of ns granting what a namespace's editor has for rekey's purposes
// (CredentialSets, Secrets, workloads).
func tenantClient(t *testing.T, user string, namespaces ...string) client.Client {
	t.Helper()
	ctx := ctxT(t)
	for _, ns := range namespaces {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-" + user}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"rekey.io"}, Resources: []string{"credentialsets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
		}}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-" + user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
		for _, o := range []client.Object{role, rb} {
			if err := k8s.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	return impersonating(t, user)
}

// impersonating is a client acting as user, with whatever RBAC grants it.
func impersonating(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// installNamespacePolicy installs the admission policies shipped in
// config/policy (what a set may read and touch, and who writes its status),
// as kubectl apply -k config/default does, and waits until the API server
// enforces them. A manager that must write status meanwhile runs as
// asManagerServiceAccount.
func installNamespacePolicy(t *testing.T, tenant client.Client, tenantNS string) {
	t.Helper()
	ctx := ctxT(t)
	objs, err := env.Manifests("config/policy/credentialset_namespaces.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var installed []*unstructured.Unstructured
	for _, u := range objs {
		if err := k8s.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("install %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		installed = append(installed, u)
	}
	probe := func() *v1.CredentialSet {
		return unreachableSet(tenantNS, "policy-probe", []v1.SecretTarget{{Namespace: "kube-system", Name: "probe"}}, nil)
	}
	// Removed at the end, and waited for: the next tests run their manager
	// as the admin, whose status writes the status policy refuses.
	t.Cleanup(func() {
		for _, u := range installed {
			_ = k8s.Delete(context.Background(), u)
		}
		eventually(t, time.Minute, "the namespaces policy to be gone", func() (bool, string) {
			err := tenant.Create(context.Background(), probe())
			if err == nil {
				_ = k8s.Delete(context.Background(), probe())
			}
			return err == nil, fmt.Sprint(err)
		})
		statusProbe := unreachableSet(tenantNS, "status-probe", nil, nil)
		if err := k8s.Create(context.Background(), statusProbe); err != nil {
			t.Errorf("status probe: %v", err)
			return
		}
		defer k8s.Delete(context.Background(), statusProbe)
		eventually(t, time.Minute, "the status policy to be gone", func() (bool, string) {
			cs := &v1.CredentialSet{}
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(statusProbe), cs); err != nil {
				return false, err.Error()
			}
			// Admission runs on every write, one that changes nothing too.
			err := k8s.Status().Update(context.Background(), cs)
			return err == nil || !apierrors.IsForbidden(err), fmt.Sprint(err)
		})
	})
	// Policies are compiled and loaded asynchronously: probe until a
	// foreign target is refused.
	eventually(t, time.Minute, "the admission policy to be enforced", func() (bool, string) {
		err := tenant.Create(ctx, probe())
		if err == nil {
			_ = k8s.Delete(ctx, probe())
			return false, "a foreign target was admitted"
		}
		return strings.Contains(err.Error(), "spec.distribution"), err.Error()
	})
}

// unreachableSet is a MySQL set whose instance does not exist: every
// refusal tested with it must happen before rekey would connect anywhere.
func unreachableSet(ns, name string, dist []v1.SecretTarget, cons []v1.ConsumerRef) *v1.CredentialSet {
	return &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{
				Instances: v1.MySQLInstances{Hosts: []string{"127.0.0.1:1"}},
				Admin:     v1.MySQLAdmin{User: "ops-admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "ops-admin", Key: "password"}},
				Users:     []v1.MySQLUser{{Name: "app"}},
				TLS:       "Disabled",
			},
			Distribution: dist,
			Consumers:    cons,
		},
	}
}

// victimDeployment is a Deployment another team owns.
func victimDeployment(t *testing.T, ns, name string) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/app"}}}},
	}}
	if err := k8s.Create(ctxT(t), d); err != nil {
		t.Fatal(err)
	}
}

func templateAnnotationsOf(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Annotations
}

func secretAbsent(t *testing.T, ns, name string) bool {
	t.Helper()
	err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// TestHostileTenant tries, as a tenant whose RBAC covers only its own
// namespace, every way a CredentialSet could make rekey act beyond that
// tenant's rights, and proves each is refused with nothing changed.
func TestHostileTenant(t *testing.T) {
	ns, victim := newNamespace(t), newNamespace(t)
	alice := tenantClient(t, tenantUser, ns)
	startManager(t, asManagerServiceAccount(cp.Config))
	ctx := ctxT(t)
	createSecret(t, ns, "ops-admin", map[string]string{"password": "tenant-admin-password"})
	victimDeployment(t, victim, "api")
	victimDeployment(t, OperatorNamespace, "rekey-like")
	var rows []attackRow
	row := func(a, r, e string) { rows = append(rows, attackRow{a, r, e}) }

	// 1-4 the manager's own defence, in a cluster without the admission
	// policy (or for a set created by someone the policy lets through):
	// it refuses before doing anything.
	runtime := []struct {
		attack, name string
		dist         []v1.SecretTarget
		cons         []v1.ConsumerRef
		check        func() (bool, string)
	}{
		{"distribution[] into another namespace, no admission policy", "r-dist", []v1.SecretTarget{{Namespace: victim, Name: "stolen"}}, nil,
			func() (bool, string) { return secretAbsent(t, victim, "stolen"), "no Secret " + victim + "/stolen" }},
		{"distribution[] into the operator's namespace, no admission policy", "r-plant",
			[]v1.SecretTarget{{Namespace: OperatorNamespace, Name: "rekey." + victim + ".db"}}, nil,
			func() (bool, string) {
				return secretAbsent(t, OperatorNamespace, "rekey."+victim+".db"), "no Secret " + OperatorNamespace + "/rekey." + victim + ".db"
			}},
		{"consumers[] in another namespace, no admission policy", "r-cons", nil, []v1.ConsumerRef{{Kind: v1.KindDeployment, Namespace: victim, Name: "api"}},
			func() (bool, string) {
				return len(templateAnnotationsOf(t, victim, "api")) == 0, "Deployment " + victim + "/api: pod template not annotated"
			}},
		{"consumers[] in the operator's namespace, no admission policy", "r-opcons", nil, []v1.ConsumerRef{{Kind: v1.KindDeployment, Namespace: OperatorNamespace, Name: "rekey-like"}},
			func() (bool, string) {
				return len(templateAnnotationsOf(t, OperatorNamespace, "rekey-like")) == 0, "Deployment " + OperatorNamespace + "/rekey-like: pod template not annotated"
			}},
	}
	for _, a := range runtime {
		cs := unreachableSet(ns, a.name, a.dist, a.cons)
		if err := alice.Create(ctx, cs); err != nil {
			t.Fatalf("%s: the tenant's create: %v", a.attack, err)
		}
		msg := waitDegraded(t, ns, a.name, reason.NamespaceNotAllowed)
		waitEvent(t, ns, a.name, string(reason.NamespaceNotAllowed))
		ok, evidence := a.check()
		if !ok {
			t.Errorf("%s: %s does not hold", a.attack, evidence)
		}
		if !secretAbsent(t, OperatorNamespace, naming.SourceSecretName(cs)) {
			t.Errorf("%s: the set was provisioned (its source Secret exists) though it is refused", a.attack)
		}
		row(a.attack, "manager: Degraded/NamespaceNotAllowed: "+firstLine(msg), evidence+"; nothing provisioned")
	}

	// 5-7 with the admission policy installed: the tenant names
	// namespaces it may not write, and is refused at once.
	installNamespacePolicy(t, alice, ns)
	admission := []struct {
		attack, name string
		dist         []v1.SecretTarget
		cons         []v1.ConsumerRef
		field        string
		check        func() (bool, string)
	}{
		{"distribution[] into another namespace", "x-dist", []v1.SecretTarget{{Namespace: victim, Name: "stolen"}}, nil, "spec.distribution",
			func() (bool, string) { return secretAbsent(t, victim, "stolen"), "no Secret " + victim + "/stolen" }},
		{"distribution[] into the operator's namespace (plant a source Secret)", "x-plant",
			[]v1.SecretTarget{{Namespace: OperatorNamespace, Name: "rekey." + victim + ".db"}}, nil, "spec.distribution",
			func() (bool, string) {
				return secretAbsent(t, OperatorNamespace, "rekey."+victim+".db"), "no Secret " + OperatorNamespace + "/rekey." + victim + ".db"
			}},
		{"consumers[] in another namespace", "x-cons", nil, []v1.ConsumerRef{{Kind: v1.KindDeployment, Namespace: victim, Name: "api"}}, "spec.consumers",
			func() (bool, string) {
				return len(templateAnnotationsOf(t, victim, "api")) == 0, "Deployment " + victim + "/api: pod template not annotated"
			}},
	}
	for _, a := range admission {
		err := alice.Create(ctx, unreachableSet(ns, a.name, a.dist, a.cons))
		if err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), a.field) {
			t.Errorf("%s: admission answered %v; want a refusal naming %s", a.attack, err, a.field)
			continue
		}
		time.Sleep(2 * time.Second) // a manager that had seen the set would have acted by now
		ok, evidence := a.check()
		if !ok {
			t.Errorf("%s: %s does not hold", a.attack, evidence)
		}
		row(a.attack, "admission: "+firstLine(err.Error()), evidence)
	}

	// 8 reading another namespace's Secret: references have no namespace
	// field, so the name resolves in the set's own namespace.
	createSecret(t, victim, "victim-admin", map[string]string{"password": "victim-admin-password"})
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(v1.GroupVersion.String())
	u.SetKind("CredentialSet")
	u.SetNamespace(ns)
	u.SetName("x-ref")
	_ = unstructured.SetNestedMap(u.Object, map[string]any{
		"mysql": map[string]any{
			"instances": map[string]any{"hosts": []any{"127.0.0.1:1"}},
			"admin": map[string]any{"user": "ops-admin", "passwordSecretRef": map[string]any{
				"namespace": victim, "name": "victim-admin", "key": "password"}},
			"users": []any{map[string]any{"name": "app"}},
			"tls":   "Disabled",
		}}, "spec")
	err := alice.Create(ctx, u, client.FieldValidation("Strict"))
	if err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("a passwordSecretRef with a namespace: %v; want strict decoding to refuse the unknown field", err)
	} else {
		row("admin.passwordSecretRef naming another namespace's Secret", "admission: "+firstLine(err.Error()), "no namespace field exists to name it")
	}

	// 9 harvesting: a set pointed at the tenant's own listener, naming the
	// victim's admin Secret by name: the Secret is looked up in the tenant's
	// namespace (absent), so no credential ever reaches the listener.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	harvest := unreachableSet(ns, "x-harvest", nil, nil)
	harvest.Spec.MySQL.Instances.Hosts = []string{ln.Addr().String()}
	harvest.Spec.MySQL.Admin.PasswordSecretRef = &v1.SecretKeyRef{Name: "victim-admin", Key: "password"}
	if err := alice.Create(ctx, harvest); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the harvest set to report its missing Secret", func() (bool, string) {
		c := condition(getSet(t, ns, "x-harvest"), reason.CondDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, ns+"/victim-admin"), fmt.Sprint(c)
	})
	if n := accepted.Load(); n != 0 {
		t.Errorf("harvest: the listener accepted %d connections", n)
	}
	row("endpoint of the tenant's naming another namespace's admin Secret", "manager: the name resolves in "+ns+" (not found)", "0 connections reached the tenant's listener")

	// 10 overwriting a Secret rekey does not own, in the tenant's namespace.
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	createSecret(t, ns, "app-config", map[string]string{"config.yaml": "owned by the app team"})
	prepareAdmin(t, c.Instances(), "tenant-ops", "tenant-ops-password-for-tests")
	createSecret(t, ns, "tenant-ops", map[string]string{"password": "tenant-ops-password-for-tests"})
	own := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own"}, Spec: v1.CredentialSetSpec{
		MySQL: &v1.MySQLSpec{
			Instances:      v1.MySQLInstances{Hosts: c.Addrs()},
			Admin:          v1.MySQLAdmin{User: "tenant-ops", PasswordSecretRef: &v1.SecretKeyRef{Name: "tenant-ops", Key: "password"}},
			TLSCASecretRef: mysqlCASecret(t, ns, "own-ca"),
			Users:          []v1.MySQLUser{{Name: "orders"}},
		},
		Distribution: []v1.SecretTarget{{Namespace: ns, Name: "app-config"}},
	}}
	if err := alice.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	msg := waitDegraded(t, ns, "own", reason.NotOwned)
	if got := string(secretData(t, ns, "app-config")["config.yaml"]); got != "owned by the app team" || len(secretData(t, ns, "app-config")) != 1 {
		t.Errorf("app-config was changed: %q", got)
	}
	row("distribution[] naming a Secret rekey does not own", "manager: Degraded/NotOwned: "+firstLine(msg), "Secret "+ns+"/app-config unchanged")

	// 11 a planted source Secret: written before the set exists (as the
	// distribution attack above would have), it must not be adopted.
	planted := mocoSet(t, ns, "planted", c)
	plantedName := naming.SourceSecretName(planted)
	before := map[string]string{}
	for k := range mocoKeys {
		before[k] = "Planted" + strings.Repeat("p", 30)
	}
	createSecret(t, OperatorNamespace, plantedName, before)
	if err := alice.Create(ctx, planted); err != nil {
		t.Fatal(err)
	}
	msg = waitDegraded(t, ns, "planted", reason.NotOwned)
	for k, v := range secretData(t, OperatorNamespace, plantedName) {
		if string(v) != before[k] {
			t.Errorf("planted source Secret key %s changed", k)
		}
	}
	if cs := getSet(t, ns, "planted"); cs.Status.KeyGeneration != 0 {
		t.Errorf("a set with a planted source Secret was provisioned: %s", stateOf(cs))
	}
	// MySQL never learned the planted passwords: moco-admin still logs in
	// with the one its Secret holds, and not with the planted one.
	initPw := string(secretData(t, ns, "planted-init")["ADMIN_PASSWORD"])
	loginMatrix(t, "planted source Secret refused", c.Instances(), map[string]string{"moco-admin": initPw}, map[string]string{"moco-admin": before["ADMIN_PASSWORD"]})
	row("source Secret planted in the operator's namespace", "manager: Degraded/NotOwned: "+firstLine(msg), "planted data unchanged, never adopted; MySQL passwords unchanged")

	t.Logf("\n%s", attackTable(rows))
	if len(rows) != 11 {
		t.Errorf("%d attacks recorded, want 11", len(rows))
	}
}
