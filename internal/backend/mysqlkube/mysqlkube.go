// Package mysqlkube builds the MySQL backend for a CredentialSet from what
// Kubernetes holds (its admin, CA and adopted Secrets, its StatefulSet, or
// its MOCO cluster through mocokube), says how the kubectl plugin
// describes MySQL sets, and registers it.
package mysqlkube

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/mocokube"
	"rekey.io/rekey/internal/backend/mysql"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/moco"
)

func init() { registry.Register(Entry) }

// Entry is the MySQL backend's registration.
var Entry = registry.Entry{
	Kind:           "mysql",
	Field:          "spec.mysql",
	Selects:        func(cs *v1.CredentialSet) bool { return cs.Spec.MySQL != nil },
	WritesNoSecret: true,
	Build:          build,
	LockKeys:       lockKeys,
	// A StatefulSet holding the instances wakes the set too: scaling it
	// from 0 resumes a refused phase at once.
	StatefulSets: func(cs *v1.CredentialSet) []string {
		if sts := moco.InstancesOf(cs.Spec.MySQL).StatefulSet; sts != nil {
			return []string{sts.Name}
		}
		return nil
	},
	Describe:   describe,
	Identities: identities,
	Flags:      []registry.Flag{{Name: FlagMOCONamespace, Usage: "MOCO's namespace (moco-system in MOCO's own manifests), where MOCO keeps each MySQLCluster's controller Secret; rekey writes them for sets with mysql.moco, and needs Secrets there in its RBAC. Empty: no MOCO cluster is served"}},
}

// FlagMOCONamespace is the manager's flag naming MOCO's namespace, where
// it keeps a Secret per cluster that rekey rotates too; empty, rekey
// serves no MOCO cluster.
const FlagMOCONamespace = "moco-namespace"

// identities are the users of the spec, for messages.
func identities(cs *v1.CredentialSet) string {
	var users []string
	for _, u := range cs.Spec.MySQL.Users {
		users = append(users, u.Name)
	}
	if len(users) == 0 {
		return "the set's MySQL users"
	}
	return "MySQL users " + registry.Summarize(users, "users", "the set's spec")
}

func build(ctx context.Context, cs *v1.CredentialSet, k registry.Kube, o registry.Options) (*registry.Plan, error) {
	// Before anything is read from the instances: a set that would break
	// another's users or admin changes nothing.
	if err := uniqueUsers(ctx, k, cs); err != nil {
		return nil, err
	}
	// A moco set stands for the spec its MySQLCluster implies.
	var mc *mocokube.Cluster
	if cs.Spec.MySQL.MOCO != nil {
		var err error
		if mc, err = mocokube.Resolve(ctx, cs, k, o.Settings.Value(FlagMOCONamespace)); err != nil {
			return nil, err
		}
		cs = cs.DeepCopy()
		cs.Spec.MySQL = mc.Spec
	}
	spec := cs.Spec.MySQL
	instances, err := listInstances(ctx, k, cs.Namespace, spec.Instances)
	if err != nil {
		return nil, err
	}
	// Each instance's certificate is verified for the host the spec knows
	// it by, also where a test dials it at another address.
	for i := range instances {
		if host, _, err := net.SplitHostPort(instances[i].Addr); err == nil {
			instances[i].ServerName = host
		}
		if o.AddressMap != nil {
			instances[i].Addr = o.AddressMap(instances[i].Addr)
		}
	}
	// Bootstrap Secrets are read only while they matter: the admin's
	// password at provisioning, or always when the admin is not rotated
	// (the source Secret is the truth for rotated users afterwards).
	provisioning := cs.Status.KeyGeneration == 0
	rotatedAdmin, err := mysql.AdminIsRotated(spec)
	if err != nil {
		return nil, &registry.SpecError{Msg: err.Error()}
	}
	adminPassword := ""
	if ref := spec.Admin.PasswordSecretRef; ref != nil && (provisioning || !rotatedAdmin) {
		if adminPassword, err = k.SecretKey(ctx, ref.Name, ref.Key); err != nil {
			return nil, err
		}
	}
	// The CA is read every time: a CA renewed in its Secret is used at once.
	var caPEM []byte
	if ref := spec.TLSCASecretRef; ref != nil {
		ca, err := k.SecretKey(ctx, ref.Name, ref.Key)
		if err != nil {
			return nil, fmt.Errorf("read mysql.tlsCASecretRef: %w", err)
		}
		caPEM = []byte(ca)
	}
	b, err := mysql.New(spec, instances, adminPassword, caPEM)
	if err != nil {
		return nil, &registry.SpecError{Msg: err.Error()}
	}
	b.Concurrency = o.InstanceConcurrency
	// What the users are marked with, so that an instance back from a
	// scale-in is known stale (mysql's generation.go).
	b.Gen, b.Target = cs.Status.KeyGeneration, engine.TargetGeneration(cs.Spec.Rotation, cs.Status)
	if b.Gen == 0 {
		b.Gen = engine.InitialGeneration(cs.Spec.Rotation)
	}
	adopt := engine.Secrets{}
	if ref := spec.AdoptSecretRef; ref != nil && provisioning {
		s, err := k.Secret(ctx, ref.Name)
		if err != nil {
			return nil, fmt.Errorf("read adoptSecretRef %s/%s: %w", cs.Namespace, ref.Name, err)
		}
		for _, key := range b.Keys() {
			if v := s.Data[key]; len(v) > 0 {
				adopt[key] = string(v)
			}
		}
	}
	if b.AdminKey != "" && adminPassword != "" {
		adopt[b.AdminKey] = adminPassword
	}
	p := &registry.Plan{Backend: b, NoInstances: len(instances) == 0, Adopt: adopt}
	if mc != nil {
		// All 8 from MOCO's own Secret, the admin's included.
		if provisioning {
			p.Adopt = maps.Clone(mc.Current)
		}
		b.Gate, p.Extra = mc.Gate, mc
	}
	// The users rekey creates are marked as this set's, except those whose
	// passwords the user handed over: deletion drops only marked ones.
	b.Fence, b.Term = k.Fence, k.FenceTerm()
	if err := b.SetOwner(string(cs.UID), slices.Collect(maps.Keys(p.Adopt))); err != nil {
		return nil, err
	}
	if spec.Instances.StatefulSet != nil {
		p.InstancesAdded = func(ctx context.Context) (bool, error) { return instancesAdded(ctx, k, cs, b) }
	}
	return p, nil
}

// listInstances lists the instances, ordinal order for a StatefulSet.
func listInstances(ctx context.Context, k registry.Kube, namespace string, in v1.MySQLInstances) ([]mysql.Instance, error) {
	if in.StatefulSet == nil {
		var out []mysql.Instance
		for _, h := range in.Hosts {
			out = append(out, mysql.Instance{Name: h, Addr: h})
		}
		return out, nil
	}
	ref := in.StatefulSet
	// Read live: a cached, stale replica count could leave a new instance
	// out of a phase.
	sts, err := k.StatefulSet(ctx, ref.Name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &registry.SpecError{Msg: fmt.Sprintf("StatefulSet %s/%s named in mysql.instances does not exist", namespace, ref.Name)}
		}
		return nil, err
	}
	return mysql.StatefulSetInstances(sts, *ref), nil
}

// instancesAdded reports whether the set now has an instance b does not
// list. A phase runs over the instances listed when the reconcile began; a
// StatefulSet scaled up while it ran (phase 1 takes seconds on a large
// cluster, more while an instance holds it up) has a new pod the phase
// never saw, whose users may hold only the current secrets (CLONEd from a
// donor before RETAIN). Recording the phase as applied then would hand
// consumers secrets that pod refuses until a later reconcile repairs it.
// The caller runs the phase again instead, over the instances as they are
// now; every phase skips what is done. Only a StatefulSet's instances
// change by themselves; hosts change only with the spec, which the
// reconcile reads anew anyway.
func instancesAdded(ctx context.Context, k registry.Kube, cs *v1.CredentialSet, b *mysql.Backend) (bool, error) {
	now, err := listInstances(ctx, k, cs.Namespace, cs.Spec.MySQL.Instances)
	if err != nil {
		return false, err
	}
	listed := map[string]bool{}
	for _, i := range b.Instances {
		listed[i.Name] = true
	}
	for _, i := range now {
		if !listed[i.Name] {
			log.FromContext(ctx).Info("an instance was added while the phase ran; running it again over every instance", "instance", i.Name)
			return true, nil
		}
	}
	return false, nil
}
