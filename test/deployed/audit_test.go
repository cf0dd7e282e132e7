package deployed

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// auditPolicy records, at Metadata level (never a request or response
// body, so never a Secret's data), every request made by a ServiceAccount.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
`

// auditFlags writes the policy into dir and returns the kube-apiserver
// flags that log to dir/audit.log.
func auditFlags(dir string) (map[string]string, string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, "", err
	}
	log := filepath.Join(dir, "audit.log")
	return map[string]string{"audit-policy-file": policy, "audit-log-path": log}, log, nil
}

// access is one kind of request: verb on group/resource[/subresource], or
// on a non-resource URL.
type access struct{ verb, group, resource, url string }

func (a access) String() string {
	if a.url != "" {
		return a.verb + " " + a.url
	}
	g := a.group
	if g == "" {
		g = "core"
	}
	return a.verb + " " + g + "/" + a.resource
}

// auditAccesses reads the audit log: the accesses user made, and every
// request of user the API server refused (403), described.
func auditAccesses(path, user string) (used map[access]int, denied []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	used = map[access]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct {
			Stage      string
			Verb       string
			RequestURI string
			User       struct{ Username string }
			ObjectRef  *struct {
				Resource, Subresource, Namespace, Name, APIGroup string
			}
			ResponseStatus *struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, nil, fmt.Errorf("audit log: %w", err)
		}
		if ev.User.Username != user || (ev.Stage != "ResponseComplete" && ev.Stage != "ResponseStarted" && ev.Stage != "Panic") {
			continue
		}
		a := access{verb: ev.Verb}
		if ev.ObjectRef != nil {
			a.group, a.resource = ev.ObjectRef.APIGroup, ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				a.resource += "/" + ev.ObjectRef.Subresource
			}
		} else {
			a.url, _, _ = strings.Cut(ev.RequestURI, "?")
		}
		refused := ev.ResponseStatus != nil && ev.ResponseStatus.Code == 403
		if ev.Stage == "ResponseComplete" && ev.Verb == "watch" && !refused {
			// A watch (also the informers' streamed list) is counted when
			// it starts: it completes only when it closes, maybe never.
			continue
		}
		if refused {
			ns := ""
			if ev.ObjectRef != nil && ev.ObjectRef.Namespace != "" {
				ns = " in " + ev.ObjectRef.Namespace
			}
			denied = append(denied, fmt.Sprintf("%s%s (%s): %s", a, ns, ev.RequestURI, ev.ResponseStatus.Message))
			continue
		}
		used[a]++
	}
	return used, denied, sc.Err()
}

// unusedRules lists each verb × resource a rule grants that no request in
// used needed.
func unusedRules(role string, rules []rbacv1.PolicyRule, used map[access]int) []string {
	var out []string
	for _, r := range rules {
		for _, v := range r.Verbs {
			for _, u := range r.NonResourceURLs {
				if used[access{verb: v, url: u}] == 0 {
					out = append(out, fmt.Sprintf("%s: %s", role, access{verb: v, url: u}))
				}
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					if used[access{verb: v, group: g, resource: res}] == 0 {
						out = append(out, fmt.Sprintf("%s: %s", role, access{verb: v, group: g, resource: res}))
					}
				}
			}
		}
	}
	return out
}

func describeUsed(used map[access]int) string {
	var out []string
	for a, n := range used {
		out = append(out, fmt.Sprintf("%s ×%d", a, n))
	}
	sort.Strings(out)
	return strings.Join(slices.Compact(out), ", ")
}

// checkAudit: the API server's audit log holds requests of the manager's
// ServiceAccount and no refused one; granted rules no request used are
// logged as review notes.
func checkAudit(t *testing.T, srv *servers, ch *chart, run *podRun) {
	auditLog, roles, bindings, pod := srv.auditLog, ch.roles, ch.bindings, run.pod
	// The audit log: every request the chart's ServiceAccount made; none
	// may have been refused. Rules no request needed are review notes.
	user := "system:serviceaccount:" + releaseNamespace + ":" + pod.Spec.ServiceAccountName
	used, refused, err := auditAccesses(auditLog, user)
	if err != nil {
		t.Fatal(err)
	}
	if len(used) == 0 {
		t.Fatalf("the audit log %s has no request of %s", auditLog, user)
	}
	if len(refused) > 0 {
		t.Errorf("the API server refused %d request(s) of %s with the chart's RBAC:\n%s", len(refused), user, strings.Join(refused, "\n"))
	}
	t.Logf("requests of %s: %s", user, describeUsed(used))
	var unused []string
	for _, b := range bindings {
		bound := false
		for _, s := range b.Subjects {
			bound = bound || (s.Kind == "ServiceAccount" && s.Namespace == releaseNamespace && s.Name == pod.Spec.ServiceAccountName)
		}
		if !bound {
			continue
		}
		key := b.RoleRef.Kind + "/" + b.Namespace + "/" + b.RoleRef.Name
		if b.RoleRef.Kind == "ClusterRole" {
			key = "ClusterRole//" + b.RoleRef.Name
		}
		unused = append(unused, unusedRules(strings.TrimPrefix(strings.ReplaceAll(key, "//", "/"), "/"), roles[key], used)...)
	}
	if len(unused) > 0 {
		t.Logf("review notes, granted to the manager but used by no request in this run (consumers, cross-namespace consent and Event aggregation are not exercised here; informers list through streamed watches, list is their fallback):\n  %s", strings.Join(unused, "\n  "))
	}
}
