package manifests

// Who besides the manager may do what once the manifests are installed: a
// namespace-only tenant under the shipped admission policy, and people
// through the built-in roles that rekey's roles aggregate into.

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/testenv"
)

// checkNamespacePolicy: the shipped admission policy, live in the API
// server, refuses a namespace-only user's CredentialSet that names another
// namespace or the operator's, and admits one that stays home.
func (k *cluster) checkNamespacePolicy(t *testing.T, what, operatorNS string) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{"tenant", "victim"} {
		if err := k.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "tenant"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"rekey.io"}, Resources: []string{"credentialsets"}, Verbs: []string{"create", "get", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "get", "update"}},
	}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "tenant"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "tenant"}}}
	for _, o := range []client.Object{role, rb} {
		if err := k.c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(k.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant"}
	tenant, err := client.New(cfg, client.Options{Scheme: installScheme})
	if err != nil {
		t.Fatal(err)
	}
	set := func(name, targetNS string) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name}, Spec: v1.CredentialSetSpec{
			RabbitMQ: &v1.RabbitMQSpec{Endpoint: "https://rabbitmq.tenant.svc:15671",
				Admin: v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "admin"}}, User: v1.RabbitMQUser{Base: name}},
			Distribution: []v1.SecretTarget{{Namespace: targetNS, Name: name}},
		}}
	}
	// The policy is loaded asynchronously after it is created.
	deadline := time.Now().Add(time.Minute)
	for {
		err := tenant.Create(ctx, set("foreign", "victim"))
		if err != nil && apierrors.IsForbidden(err) && strings.Contains(err.Error(), "spec.distribution: tenant may not create and update Secrets in all of victim/foreign") {
			break
		}
		if err == nil {
			_ = k.c.Delete(ctx, set("foreign", "victim"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: a tenant's CredentialSet distributing into another namespace: %v; want the admission policy's refusal", what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// Even a cluster admin may not target the operator's namespace.
	err = k.c.Create(ctx, set("plant", operatorNS))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "namespace "+operatorNS+" is the operator's own") {
		t.Errorf("%s: a CredentialSet distributing into %s: %v; want the admission policy's refusal", what, operatorNS, err)
	}
	if err := tenant.Create(ctx, set("home", "tenant")); err != nil {
		t.Errorf("%s: a tenant's CredentialSet distributing into its own namespace: %v", what, err)
	}
}

// TestUserRolesAggregate: with the kube-controller-manager aggregating
// ClusterRoles (a full control plane), the built-in edit, admin and view
// roles gain exactly rekey's rights on CredentialSets once config/default is
// installed, as the live authorizer sees them.
func TestUserRolesAggregate(t *testing.T) {
	t.Parallel()
	env := testenv.Require(t)
	kustomize := pinnedTool(t, env, "kustomize", "sigs.k8s.io/kustomize/kustomize/v5", "KUSTOMIZE_VERSION")
	objs := unstructuredObjects(t, "kustomize build config/default", runTool(t, env, kustomize, "build", "config/default"))
	k := clusterOn(t, testenv.FullControlPlaneForTest(t, testenv.ControlPlaneOptions{}))
	k.install(t, "config/default", objs)
	ctx := context.Background()
	if err := k.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"edit", "admin", "view"} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: r},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "team-" + r}}}
		if err := k.c.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	userCan := func(user, verb, resource string) bool {
		group := "rekey.io"
		if g, r, ok := strings.Cut(resource, ":"); ok {
			group, resource = g, r
		}
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team", Group: group, Verb: verb,
				Resource: strings.Split(resource, "/")[0], Subresource: subresource(resource)},
		}}
		if err := k.c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	// The aggregation controller fills the built-in roles asynchronously.
	deadline := time.Now().Add(time.Minute)
	for !userCan("team-edit", "create", "credentialsets") || !userCan("team-view", "list", "credentialsets") {
		if time.Now().After(deadline) {
			t.Fatal("edit/view never gained CredentialSets: rekey-edit/rekey-view were not aggregated")
		}
		time.Sleep(500 * time.Millisecond)
	}
	cases := []struct {
		user, verb, resource string
		want                 bool
	}{
		{"team-edit", "create", "credentialsets", true},
		{"team-edit", "delete", "credentialsets", true},
		{"team-edit", "get", "credentialsets/status", true},
		{"team-edit", "update", "credentialsets/status", false},
		{"team-admin", "update", "credentialsets", true},
		{"team-view", "list", "credentialsets", true},
		{"team-view", "get", "credentialsets/status", true},
		{"team-view", "create", "credentialsets", false},
		{"team-view", "patch", "credentialsets", false},
		// kubectl rekey status and --wait read the sets' Events through
		// events.k8s.io, which the built-in roles do not cover.
		{"team-view", "list", "events.k8s.io:events", true},
		{"team-view", "watch", "events.k8s.io:events", true},
		{"team-edit", "list", "events.k8s.io:events", true},
		{"team-view", "create", "events.k8s.io:events", false},
		{"nobody", "get", "credentialsets", false},
	}
	for _, c := range cases {
		if got := userCan(c.user, c.verb, c.resource); got != c.want {
			t.Errorf("%s %s %s in team: allowed=%v, want %v", c.user, c.verb, c.resource, got, c.want)
		}
	}
}
