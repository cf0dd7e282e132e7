// Package tenancy decides which namespaces a CredentialSet may make rekey
// act in. By default only its own: rekey's ServiceAccount can write Secrets
// and patch workloads far beyond what the set's author may, so anything
// else needs consent that the set's author cannot forge.
package tenancy

import (
	"fmt"
	"slices"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TrustAnnotation, on a Namespace, lists the namespaces whose
// CredentialSets may write Secrets and restart workloads in it
// (comma-separated). Only those who may update the Namespace object — its
// owners, not its tenants — can set it; removing a namespace from it stops
// further writes at the next reconcile.
const TrustAnnotation = "rekey.io/trusted-source-namespaces"

// Reach is one place outside its own namespace a set asks rekey to act.
type Reach struct {
	// Field is the spec path, e.g. spec.distribution[1].namespace.
	Field     string
	Namespace string
	// What rekey would do there, in words.
	What string
}

// Reaches lists every namespace the spec asks rekey to write or patch in,
// with its field; the set's own namespace included (Decide allows it).
func Reaches(cs *v1.CredentialSet) []Reach {
	var out []Reach
	for i, t := range cs.Spec.Distribution {
		ns := t.Namespace
		if ns == "" {
			ns = cs.Namespace
		}
		out = append(out, Reach{Field: fmt.Sprintf("spec.distribution[%d].namespace", i), Namespace: ns,
			What: "write Secret " + ns + "/" + t.Name})
	}
	for i, c := range cs.Spec.Consumers {
		ns := c.Namespace
		if ns == "" {
			ns = cs.Namespace
		}
		out = append(out, Reach{Field: fmt.Sprintf("spec.consumers[%d].namespace", i), Namespace: ns,
			What: fmt.Sprintf("restart %s %s/%s", c.Kind, ns, c.Name)})
	}
	return out
}

// Trusted parses a Namespace's TrustAnnotation.
func Trusted(annotations map[string]string) []string {
	var out []string
	for _, s := range strings.Split(annotations[TrustAnnotation], ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Denial says why a reach is refused and what would allow it.
type Denial struct {
	Reach   Reach
	Message string
}

// Decide returns the first reach that is not allowed, or nil. setNS is the
// set's namespace, operatorNS the operator's (which holds the source
// Secrets and is never a target: a Secret written there could pose as
// another set's source Secret). trusted maps each foreign namespace to the
// source namespaces its TrustAnnotation lists (absent: none, or the
// namespace does not exist).
func Decide(setNS, operatorNS string, reaches []Reach, trusted map[string][]string) *Denial {
	for _, r := range reaches {
		switch {
		case r.Namespace == operatorNS:
			return &Denial{r, fmt.Sprintf("%s: rekey will not %s: namespace %s is the operator's own, which holds every set's source Secret; choose another namespace",
				r.Field, r.What, operatorNS)}
		case r.Namespace == setNS:
			continue
		case slices.Contains(trusted[r.Namespace], setNS):
			continue
		default:
			return &Denial{r, fmt.Sprintf("%s: rekey will not %s: namespace %s has not consented to CredentialSets of namespace %s; an owner of %s can allow it with `kubectl annotate namespace %s %s=%s` (comma-separated list), or keep this target in %s",
				r.Field, r.What, r.Namespace, setNS, r.Namespace, r.Namespace, TrustAnnotation, setNS, setNS)}
		}
	}
	return nil
}

// Foreign lists the namespaces other than setNS that reaches name, each
// once, in order: the Namespace objects whose consent must be read.
func Foreign(setNS string, reaches []Reach) []string {
	var out []string
	for _, r := range reaches {
		if r.Namespace != setNS && !slices.Contains(out, r.Namespace) {
			out = append(out, r.Namespace)
		}
	}
	return out
}
