package controller

import (
	"context"
	"fmt"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/rabbitmq"
	"rekey.io/rekey/internal/engine"
)

// rabbitPlan builds the RabbitMQ backend from the admin Secret.
func (r *Reconciler) rabbitPlan(ctx context.Context, cs *v1.CredentialSet) (*plan, error) {
	ctx = withSecretMemo(ctx) // writes no Secret: each read once
	spec := cs.Spec.RabbitMQ
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
	var list v1.CredentialSetList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	// A user several sets adopted is deleted by the last set that holds
	// it; marks of sets that no longer exist are not waited for.
	live := map[string]bool{}
	for _, o := range list.Items {
		live[string(o.UID)] = true
	}
	b.LiveOwner = func(uid string) bool { return live[uid] }
	p := &plan{backend: b}
	if !cs.DeletionTimestamp.IsZero() {
		// Deleting only removes what the set holds: no refusal may keep
		// a set (and its namespace) from going.
		return p, nil
	}
	if err := r.uniqueRabbitUsers(ctx, cs, b, list.Items); err != nil {
		return nil, err
	}
	if a := spec.Adopt; a != nil && cs.Status.KeyGeneration == 0 {
		// Proven before provisioning records anything: a wrong password
		// is refused with nothing stored, changed or distributed, and
		// fixing the Secret is all it takes to go on.
		pw, err := r.readSecretKey(ctx, cs.Namespace, a.PasswordSecretRef.Name, a.PasswordSecretRef.Key)
		if err != nil {
			return nil, err
		}
		if err := b.ProveAdoption(ctx, pw); err != nil {
			return nil, err
		}
		p.adopt = engine.Secrets{rabbitmq.KeyUsername: a.User, rabbitmq.KeyPassword: pw}
	}
	return p, nil
}

// uniqueRabbitUsers refuses a set whose users another set on the same
// RabbitMQ cluster makes too: the same user.base (both would make
// <base>-g<N>), or an adopted user that is one of the other's generations.
// "The same cluster" is the same endpoint, or another endpoint whose broker
// reports the same cluster name (status.cluster): a cluster's nodes, or a
// Service and a node's address, reach the same users.
//
// Of two such sets, the one that provisioned first keeps the names (or,
// when neither has, the one created first), and a set that provisioned is
// never refused for a clash: its users carry its mark, which the broker
// checks on every change, so a set created or edited later can at most be
// refused itself, never stop one that works. Refusing rather than waiting
// keeps retirement simple: generation users belong to one set, so only
// that set's consumers can hold them and retirement waits for no other set
// (scopeMoved). The one user several sets may hold is an adopted one, and
// each set lets go of it on its own (its mark), the last one deleting it.
func (r *Reconciler) uniqueRabbitUsers(ctx context.Context, cs *v1.CredentialSet, b *rabbitmq.Backend, sets []v1.CredentialSet) error {
	if cs.Status.KeyGeneration > 0 {
		return nil
	}
	norm := func(e string) string { return strings.ToLower(strings.TrimRight(e, "/")) }
	me := cs.Spec.RabbitMQ
	myCluster := cs.Status.Cluster
	for i := range sets {
		o := &sets[i]
		if o.UID == cs.UID || o.Spec.RabbitMQ == nil || !rabbitPrecedes(o, cs) {
			continue
		}
		clash := rabbitClash(me, o.Spec.RabbitMQ)
		if clash == "" {
			continue
		}
		where := me.Endpoint
		if norm(o.Spec.RabbitMQ.Endpoint) != norm(me.Endpoint) {
			if o.Status.Cluster == "" {
				continue
			}
			if myCluster == "" {
				id, err := b.ClusterID(ctx)
				if err != nil {
					return err
				}
				myCluster = id
			}
			if myCluster != o.Status.Cluster {
				continue
			}
			where = fmt.Sprintf("RabbitMQ cluster %s (reached by that set through %s)", myCluster, o.Spec.RabbitMQ.Endpoint)
		}
		return &errSpec{fmt.Sprintf("CredentialSet %s/%s %s on %s, and it came first; two sets would make the same users, so this set changed nothing: give this set another rabbitmq.user.base (it then starts by itself, as it does once that set is deleted)",
			o.Namespace, o.Name, clash, where)}
	}
	return nil
}

// rabbitClash says how two sets' users collide, "" when they do not. Two
// sets adopting the same user is no clash: they share it.
func rabbitClash(me, o *v1.RabbitMQSpec) string {
	switch {
	case me.User.Base == o.User.Base:
		return fmt.Sprintf("already rotates user base %q", me.User.Base)
	case me.Adopt != nil && rabbitmq.IsGeneration(o.User.Base, me.Adopt.User):
		return fmt.Sprintf("makes the users %s-g<N>, and this set's adopt.user %s is one of them", o.User.Base, me.Adopt.User)
	case o.Adopt != nil && rabbitmq.IsGeneration(me.User.Base, o.Adopt.User):
		return fmt.Sprintf("adopted user %s, which this set's user.base %q would make as one of its generations", o.Adopt.User, me.User.Base)
	}
	return ""
}

// rabbitPrecedes: o keeps clashing names rather than cs — it provisioned
// and cs has not, or neither has and o was created first (its UID breaks a
// tie within the same second).
func rabbitPrecedes(o, cs *v1.CredentialSet) bool {
	if op, cp := o.Status.KeyGeneration > 0, cs.Status.KeyGeneration > 0; op != cp {
		return op
	}
	if !o.CreationTimestamp.Equal(&cs.CreationTimestamp) {
		return o.CreationTimestamp.Before(&cs.CreationTimestamp)
	}
	return o.UID < cs.UID
}
