package controller

import (
	"context"
	"fmt"
	"net"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/mysql"
	"rekey.io/rekey/internal/engine"
)

// plan is what one reconcile works with: the backend for the set's spec,
// whether it has any instance to act on, and the secrets to adopt at
// provisioning.
type plan struct {
	backend     engine.Backend
	noInstances bool
	adopt       engine.Secrets
}

// errSpec marks a spec problem the user must fix; it is not retried fast.
type errSpec struct{ msg string }

func (e *errSpec) Error() string { return e.msg }

func (r *Reconciler) planFor(ctx context.Context, cs *v1.CredentialSet) (*plan, error) {
	if err := checkTargetFormats(cs); err != nil {
		return nil, err
	}
	switch {
	case cs.Spec.MySQL != nil:
		return r.mysqlPlan(ctx, cs)
	case cs.Spec.Ceph != nil:
		return r.cephPlan(ctx, cs)
	case cs.Spec.RabbitMQ != nil:
		return r.rabbitPlan(ctx, cs)
	default:
		return nil, &errSpec{"no backend block: set spec.mysql, spec.ceph or spec.rabbitmq"}
	}
}

func (r *Reconciler) mysqlPlan(ctx context.Context, cs *v1.CredentialSet) (*plan, error) {
	ctx = withSecretMemo(ctx) // writes no Secret: each read once
	spec := cs.Spec.MySQL
	instances, err := r.mysqlInstances(ctx, cs.Namespace, spec.Instances)
	if err != nil {
		return nil, err
	}
	// Each instance's certificate is verified for the host the spec knows
	// it by, also where a test dials it at another address.
	for i := range instances {
		if host, _, err := net.SplitHostPort(instances[i].Addr); err == nil {
			instances[i].ServerName = host
		}
		if r.AddressMap != nil {
			instances[i].Addr = r.AddressMap(instances[i].Addr)
		}
	}
	// Bootstrap Secrets are read only while they matter: the admin's
	// password at provisioning, or always when the admin is not rotated
	// (the source Secret is the truth for rotated users afterwards).
	provisioning := cs.Status.KeyGeneration == 0
	rotatedAdmin, err := mysql.AdminIsRotated(spec)
	if err != nil {
		return nil, &errSpec{err.Error()}
	}
	adminPassword := ""
	if ref := spec.Admin.PasswordSecretRef; ref != nil && (provisioning || !rotatedAdmin) {
		if adminPassword, err = r.readSecretKey(ctx, cs.Namespace, ref.Name, ref.Key); err != nil {
			return nil, err
		}
	}
	// The CA is read every time: a CA renewed in its Secret is used at once.
	var caPEM []byte
	if ref := spec.TLSCASecretRef; ref != nil {
		ca, err := r.readSecretKey(ctx, cs.Namespace, ref.Name, ref.Key)
		if err != nil {
			return nil, fmt.Errorf("read mysql.tlsCASecretRef: %w", err)
		}
		caPEM = []byte(ca)
	}
	b, err := mysql.New(spec, instances, adminPassword, caPEM)
	if err != nil {
		return nil, &errSpec{err.Error()}
	}
	b.Concurrency = r.InstanceConcurrency
	adopt := engine.Secrets{}
	if ref := spec.AdoptSecretRef; ref != nil && provisioning {
		s := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cs.Namespace, Name: ref.Name}, s); err != nil {
			return nil, fmt.Errorf("read adoptSecretRef %s/%s: %w", cs.Namespace, ref.Name, err)
		}
		for _, k := range b.Keys() {
			if v := s.Data[k]; len(v) > 0 {
				adopt[k] = string(v)
			}
		}
	}
	if b.AdminKey != "" && adminPassword != "" {
		adopt[b.AdminKey] = adminPassword
	}
	return &plan{backend: b, noInstances: len(instances) == 0, adopt: adopt}, nil
}

// mysqlInstances lists the instances, ordinal order for a StatefulSet.
func (r *Reconciler) mysqlInstances(ctx context.Context, namespace string, in v1.MySQLInstances) ([]mysql.Instance, error) {
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
	sts := &appsv1.StatefulSet{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, sts); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &errSpec{fmt.Sprintf("StatefulSet %s/%s named in mysql.instances does not exist", namespace, ref.Name)}
		}
		return nil, err
	}
	return mysql.StatefulSetInstances(sts, *ref), nil
}
