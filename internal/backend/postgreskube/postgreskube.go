// Package postgreskube builds the PostgreSQL backend for a CredentialSet
// from what Kubernetes holds (the admin and CA Secrets), says how the
// kubectl plugin describes PostgreSQL sets, and registers it.
package postgreskube

import (
	"context"
	"net"
	"sort"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/postgres"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
)

func init() { registry.Register(Entry) }

// Entry is the PostgreSQL backend's registration.
var Entry = registry.Entry{
	Kind:           "postgres",
	Field:          "spec.postgres",
	Selects:        func(cs *v1.CredentialSet) bool { return cs.Spec.Postgres != nil },
	WritesNoSecret: true,
	Build:          build,
	LockKeys:       lockKeys,
	// The StatefulSets holding the instances wake the set: scaling one
	// from 0 resumes a refused phase at once.
	StatefulSets: statefulSetNames,
	Describe:     describe,
	Target:       target,
	Identities:   identities,
}

// identities are the logins of every base the set rotates, for messages.
func identities(cs *v1.CredentialSet) string {
	var bases []string
	for _, l := range cs.Spec.Postgres.RotatingLogins() {
		bases = append(bases, l.Base+"_g<N>")
	}
	return "PostgreSQL logins " + strings.Join(bases, ", ")
}

// lockKeys are the instances, "postgres:<host>:<port>", and a
// StatefulSet's pods "postgres:statefulset/<namespace>/<name>" (whatever
// its replica count, and also when a host names one of them): two sets on
// one cluster are never reconciled at once.
func lockKeys(cs *v1.CredentialSet) []string {
	var keys []string
	for _, s := range cs.Spec.Postgres.StatefulSets {
		keys = append(keys, "postgres:statefulset/"+cs.Namespace+"/"+s.Name)
	}
	for _, h := range cs.Spec.Postgres.Hosts {
		if m := statefulSetPod.FindStringSubmatch(strings.ToLower(h)); m != nil {
			keys = append(keys, "postgres:statefulset/"+m[4]+"/"+m[1])
			continue
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			keys = append(keys, "postgres:"+strings.ToLower(h))
			continue
		}
		keys = append(keys, "postgres:"+net.JoinHostPort(strings.ToLower(host), port))
	}
	sort.Strings(keys)
	return keys
}

// build makes the PostgreSQL backend from the admin and CA Secrets.
func build(ctx context.Context, cs *v1.CredentialSet, k registry.Kube, o registry.Options) (*registry.Plan, error) {
	spec := cs.Spec.Postgres
	user, err := k.SecretKey(ctx, spec.Admin.SecretRef.Name, spec.Admin.UsernameSecretKey())
	if err != nil {
		return nil, err
	}
	password, err := k.SecretKey(ctx, spec.Admin.SecretRef.Name, spec.Admin.PasswordSecretKey())
	if err != nil {
		return nil, err
	}
	var ca []byte
	if r := spec.TLSCASecretRef; r != nil {
		pem, err := k.SecretKey(ctx, r.Name, r.Key)
		if err != nil {
			return nil, err
		}
		ca = []byte(pem)
	}
	hosts, err := hostsOf(ctx, k, cs.Namespace, spec)
	if err != nil {
		return nil, err
	}
	resolved := spec.DeepCopy()
	resolved.Hosts = hosts
	// The set's UID marks every login role rekey creates for it: roles
	// without it (another set's, made by hand) are never changed or dropped.
	b, err := postgres.New(resolved, string(cs.UID), user, password, ca)
	if err != nil {
		return nil, &registry.SpecError{Msg: err.Error()}
	}
	b.AddressMap = o.AddressMap
	b.Fence, b.Term = k.Fence, k.FenceTerm()
	p := &registry.Plan{Backend: b, NoInstances: len(hosts) == 0}
	if len(spec.StatefulSets) > 0 {
		p.InstancesAdded = func(ctx context.Context) (bool, error) { return added(ctx, k, cs, hosts) }
	}
	if p.NoInstances {
		return p, nil
	}
	if cs.Status.KeyGeneration != 0 || !cs.DeletionTimestamp.IsZero() {
		return p, nil
	}
	for _, l := range adoptions(spec) {
		// Proven before provisioning records anything: a wrong password
		// is refused with nothing stored, changed or distributed, and
		// fixing the Secret is all it takes to go on.
		pw, err := k.SecretKey(ctx, l.Adopt.PasswordSecretRef.Name, l.Adopt.PasswordSecretRef.Key)
		if err != nil {
			return nil, err
		}
		if err := b.ProveAdoption(ctx, l.Base, pw); err != nil {
			return nil, err
		}
		if p.Adopt == nil {
			p.Adopt = engine.Secrets{}
		}
		prefix := postgres.Prefix(spec, l.Base)
		p.Adopt[prefix+postgres.KeyUsername], p.Adopt[prefix+postgres.KeyPassword] = l.Adopt.Role, pw
	}
	return p, nil
}

// adoptions are the logins that adopt a role, each with its adopt:
// spec.postgres.adopt for login, each item's own for logins.
func adoptions(spec *v1.PostgresSpec) []v1.PostgresLogin {
	if len(spec.Logins) == 0 {
		if spec.Adopt == nil {
			return nil
		}
		l := spec.Login
		l.Adopt = spec.Adopt
		return []v1.PostgresLogin{l}
	}
	var out []v1.PostgresLogin
	for _, l := range spec.Logins {
		if l.Adopt != nil {
			out = append(out, l)
		}
	}
	return out
}
