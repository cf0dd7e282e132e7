package manifests

// The RBAC the manifests grant, computed from their objects: no wildcard,
// Secrets never deleted or patched, the manager's ServiceAccount granted
// exactly what it uses, and the roles for people granting CredentialSets
// only.

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// grant is one permission: verb on group/resource, in a namespace or
// cluster-wide ("").
type grant struct{ namespace, group, resource, verb string }

func (g grant) String() string {
	scope := "cluster-wide"
	if g.namespace != "" {
		scope = "in " + g.namespace
	}
	group := g.group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %s/%s %s", g.verb, group, g.resource, scope)
}

// rbacObjects decodes the RBAC objects of a manifest set.
type rbacObjects struct {
	roles    map[string]rbacv1.ClusterRole // "Kind/namespace/name"
	bindings []rbacv1.RoleBinding          // ClusterRoleBindings have an empty namespace
	// userRoles are the ClusterRoles for people (label rekey.io/for=users),
	// bound by administrators, never to the manager.
	userRoles map[string]rbacv1.ClusterRole
}

func loadRBAC(t *testing.T, objs []object) rbacObjects {
	t.Helper()
	r := rbacObjects{roles: map[string]rbacv1.ClusterRole{}, userRoles: map[string]rbacv1.ClusterRole{}}
	for _, o := range objs {
		switch o.meta.Kind {
		case "Role", "ClusterRole":
			var role rbacv1.ClusterRole // same shape as Role, plus aggregationRule
			if err := yaml.UnmarshalStrict(o.raw, &role); err != nil {
				t.Fatalf("%s: %v", o, err)
			}
			if role.AggregationRule != nil {
				t.Errorf("%s: aggregation makes grants depend on other roles; list rules", o)
			}
			if role.Labels["rekey.io/for"] == "users" {
				r.userRoles[role.Name] = role
				continue
			}
			r.roles[o.meta.Kind+"/"+role.Namespace+"/"+role.Name] = role
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.RoleBinding
			if err := yaml.UnmarshalStrict(o.raw, &b); err != nil {
				t.Fatalf("%s: %v", o, err)
			}
			r.bindings = append(r.bindings, b)
		}
	}
	return r
}

var secretVerbs = []string{"get", "list", "watch", "create", "update"}

// checkRules: no wildcard anywhere; Secrets never deleted or patched (the
// manager reads them live; list and watch feed only the label-selected
// informer of the Secrets it wrote).
func checkRules(t *testing.T, what string, r rbacObjects) {
	t.Helper()
	if len(r.roles) == 0 {
		t.Fatalf("%s: no Role or ClusterRole", what)
	}
	for key, role := range r.roles {
		for _, rule := range role.Rules {
			for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames, rule.NonResourceURLs} {
				for _, v := range list {
					if strings.Contains(v, "*") {
						t.Errorf("%s: %s grants wildcard %q", what, key, v)
					}
				}
			}
			if len(rule.NonResourceURLs) > 0 {
				t.Errorf("%s: %s grants non-resource URLs %v", what, key, rule.NonResourceURLs)
			}
			if slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, "secrets") {
				for _, v := range rule.Verbs {
					if !slices.Contains(secretVerbs, v) {
						t.Errorf("%s: %s grants %s on secrets; the manager only gets, watches, creates and updates them", what, key, v)
					}
				}
			}
		}
	}
}

// effective computes what the ServiceAccount sa/namespace may do.
func effective(t *testing.T, what string, r rbacObjects, saNamespace, sa string) map[grant]bool {
	t.Helper()
	out := map[grant]bool{}
	for _, b := range r.bindings {
		bound := false
		for _, s := range b.Subjects {
			bound = bound || (s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == saNamespace)
		}
		if !bound {
			continue
		}
		roleKey := boundRole(b)
		role, ok := r.roles[roleKey]
		if !ok {
			t.Errorf("%s: binding %s/%s refers to missing %s", what, b.Namespace, b.Name, roleKey)
			continue
		}
		for _, rule := range role.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						out[grant{b.Namespace, g, res, v}] = true
					}
				}
			}
		}
	}
	for key := range r.roles {
		used := false
		for _, b := range r.bindings {
			used = used || boundRole(b) == key
		}
		if !used {
			t.Errorf("%s: %s is bound to nothing", what, key)
		}
	}
	return out
}

// boundRole is the key in rbacObjects.roles of the role b binds.
func boundRole(b rbacv1.RoleBinding) string {
	if b.RoleRef.Kind == "ClusterRole" {
		return "ClusterRole//" + b.RoleRef.Name
	}
	return b.RoleRef.Kind + "/" + b.Namespace + "/" + b.RoleRef.Name
}

// needed is what the manager does, from internal/controller, cmd/manager and
// controller-runtime. Keep it in step with the code and docs/operations.md.
// watch lists the namespaces of namespaced mode; none: every namespace.
func needed(operatorNS string, secretNamespaces []string, leaderElection bool, watch ...string) map[grant]bool {
	out := map[grant]bool{}
	add := func(ns, group string, resources []string, verbs ...string) {
		for _, r := range resources {
			for _, v := range verbs {
				out[grant{ns, group, r, v}] = true
			}
		}
	}
	// CredentialSets: cached (list, watch), read live (get), trigger
	// annotations removed (patch); status: compare-and-set patches.
	if len(watch) == 0 {
		watch = []string{""}
	}
	for _, ns := range watch {
		add(ns, "rekey.io", []string{"credentialsets"}, "get", "list", "watch", "patch")
		add(ns, "rekey.io", []string{"credentialsets/status"}, "patch")
		// The set's Events (events.k8s.io recorder).
		add(ns, "events.k8s.io", []string{"events"}, "create", "patch")
		// Consumers and instance StatefulSets: cached (list, watch), the
		// instance StatefulSet read live (get), restart annotation patched.
		add(ns, "apps", []string{"statefulsets", "deployments", "daemonsets"}, "get", "list", "watch", "patch")
		// CronJob consumers: cached, job template marked; their Jobs
		// listed live.
		add(ns, "batch", []string{"cronjobs"}, "get", "list", "watch", "patch")
		add(ns, "batch", []string{"jobs"}, "list")
	}
	// A target namespace's consent annotation, read live.
	add("", "", []string{"namespaces"}, "get")
	// The secure metrics endpoint authenticates and authorizes callers.
	add("", "authentication.k8s.io", []string{"tokenreviews"}, "create")
	add("", "authorization.k8s.io", []string{"subjectaccessreviews"}, "create")
	// Source Secrets.
	add(operatorNS, "", []string{"secrets"}, secretVerbs...)
	// Distribution targets (get, create, update) and admin/adopt (get).
	for _, ns := range secretNamespaces {
		add(ns, "", []string{"secrets"}, secretVerbs...)
	}
	if leaderElection {
		add(operatorNS, "coordination.k8s.io", []string{"leases"}, "get", "create", "update")
		add(operatorNS, "", []string{"events"}, "create", "patch")
	}
	return out
}

// checkGrants: the ServiceAccount gets exactly what the manager needs.
func checkGrants(t *testing.T, what string, got, want map[grant]bool) {
	t.Helper()
	var missing, extra []string
	for g := range want {
		if !got[g] {
			missing = append(missing, g.String())
		}
	}
	for g := range got {
		if !want[g] {
			extra = append(extra, g.String())
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	for _, m := range missing {
		t.Errorf("%s: the manager needs %s", what, m)
	}
	for _, e := range extra {
		t.Errorf("%s: grants %s, which the manager does not use", what, e)
	}
}

// TestConfigRBAC: config/ RBAC has no wildcard, no list/watch on Secrets,
// and grants the manager exactly what it uses.
func TestConfigRBAC(t *testing.T) {
	all := []object{}
	for _, f := range configFiles(t) {
		objs, err := decode(f, readFile(t, f))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, objs...)
	}
	checkRules(t, "config/", loadRBAC(t, all))

	r := loadRBAC(t, build(t, "config/default"))
	got := effective(t, "config/default", r, operatorNamespace, "rekey-controller-manager")
	checkGrants(t, "config/default", got, needed(operatorNamespace, []string{""}, true))
	checkUserRoles(t, "config/default", r, "rekey")
}

// checkUserRoles: the roles for people exist, are aggregated into the
// built-in roles that fit them, and grant nothing but CredentialSets (and
// the metrics URL): creating a CredentialSet must not come with any other
// right.
func checkUserRoles(t *testing.T, what string, r rbacObjects, prefix string) {
	t.Helper()
	want := map[string][]string{
		prefix + "-edit":           {"rbac.authorization.k8s.io/aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-admin"},
		prefix + "-view":           {"rbac.authorization.k8s.io/aggregate-to-view"},
		prefix + "-metrics-reader": nil,
	}
	for name, labels := range want {
		role, ok := r.userRoles[name]
		if !ok {
			t.Errorf("%s: no ClusterRole %s for users", what, name)
			continue
		}
		for _, l := range labels {
			if role.Labels[l] != "true" {
				t.Errorf("%s: %s lacks label %s=true", what, name, l)
			}
		}
		for _, rule := range role.Rules {
			if len(rule.NonResourceURLs) > 0 {
				if name != prefix+"-metrics-reader" || !slices.Equal(rule.NonResourceURLs, []string{"/metrics"}) || !slices.Equal(rule.Verbs, []string{"get"}) {
					t.Errorf("%s: %s grants %v on %v", what, name, rule.Verbs, rule.NonResourceURLs)
				}
				continue
			}
			// Besides CredentialSets, reading Events (events.k8s.io, what
			// kubectl rekey reads) and nothing else.
			if slices.Equal(rule.APIGroups, []string{"events.k8s.io"}) {
				if !slices.Equal(rule.Resources, []string{"events"}) || !slices.Equal(rule.Verbs, []string{"get", "list", "watch"}) {
					t.Errorf("%s: %s grants %v on events.k8s.io %v; read only", what, name, rule.Verbs, rule.Resources)
				}
				continue
			}
			if !slices.Equal(rule.APIGroups, []string{"rekey.io"}) {
				t.Errorf("%s: %s grants on API groups %v; users' roles grant CredentialSets (and reading Events) only", what, name, rule.APIGroups)
			}
			for _, res := range rule.Resources {
				if res != "credentialsets" && res != "credentialsets/status" {
					t.Errorf("%s: %s grants on %s", what, name, res)
				}
			}
			if strings.HasSuffix(name, "-view") {
				for _, v := range rule.Verbs {
					if v != "get" && v != "list" && v != "watch" {
						t.Errorf("%s: %s grants %s", what, name, v)
					}
				}
			}
		}
	}
}
