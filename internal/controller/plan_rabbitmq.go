package controller

import (
	"context"
	"fmt"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/rabbitmq"
)

// rabbitPlan builds the RabbitMQ backend from the admin Secret.
func (r *Reconciler) rabbitPlan(ctx context.Context, cs *v1.CredentialSet) (*plan, error) {
	spec := cs.Spec.RabbitMQ
	if err := r.uniqueRabbitBase(ctx, cs); err != nil {
		return nil, err
	}
	ref := spec.Admin
	userKey, pwKey := ref.UsernameKey, ref.PasswordKey
	if userKey == "" {
		userKey = "username"
	}
	if pwKey == "" {
		pwKey = "password"
	}
	user, err := r.readSecretKey(ctx, cs.Namespace, ref.SecretRef.Name, userKey)
	if err != nil {
		return nil, err
	}
	password, err := r.readSecretKey(ctx, cs.Namespace, ref.SecretRef.Name, pwKey)
	if err != nil {
		return nil, err
	}
	var ca []byte
	if spec.TLS != nil && spec.TLS.CASecretRef != nil {
		pem, err := r.readSecretKey(ctx, cs.Namespace, spec.TLS.CASecretRef.Name, spec.TLS.CASecretRef.Key)
		if err != nil {
			return nil, err
		}
		ca = []byte(pem)
	}
	// The set's UID marks every user rekey creates for it: users without it
	// (another set's, another tenant's) are never changed or deleted.
	b, err := rabbitmq.New(spec, string(cs.UID), user, password, ca)
	if err != nil {
		return nil, &errSpec{err.Error()}
	}
	return &plan{backend: b}, nil
}

// uniqueRabbitBase refuses two sets rotating the same user base on one
// broker: each would take the other's generations for orphans and delete
// them.
func (r *Reconciler) uniqueRabbitBase(ctx context.Context, cs *v1.CredentialSet) error {
	var list v1.CredentialSetList
	if err := r.Client.List(ctx, &list); err != nil {
		return err
	}
	norm := func(e string) string { return strings.ToLower(strings.TrimRight(e, "/")) }
	me := cs.Spec.RabbitMQ
	for _, o := range list.Items {
		if o.UID == cs.UID || o.Spec.RabbitMQ == nil || o.Spec.RabbitMQ.User.Base != me.User.Base ||
			norm(o.Spec.RabbitMQ.Endpoint) != norm(me.Endpoint) {
			continue
		}
		return &errSpec{fmt.Sprintf("CredentialSet %s/%s already rotates user base %q on %s: two sets would delete each other's users; give this set another rabbitmq.user.base",
			o.Namespace, o.Name, me.User.Base, me.Endpoint)}
	}
	return nil
}
