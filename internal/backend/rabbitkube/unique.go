package rabbitkube

import (
	"context"
	"fmt"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/rabbitmq"
	"rekey.io/rekey/internal/backend/registry"
)

// uniqueUsers refuses a set whose users another set on the same
// RabbitMQ cluster makes too: the same user.base (both would make
// <base>-g<N>), or an adopted user that is one of the other's generations.
// "The same cluster" is the same endpoint, or another endpoint whose broker
// reports the same cluster name (status.cluster): a cluster's nodes, or a
// Service and a node's address, reach the same users.
//
// Of two such sets, the one that provisioned keeps the names, and a set
// that provisioned is never refused for a clash: its users carry its mark,
// which the broker checks on every change, so a set created or edited later
// can at most be refused itself, never stop one that works. While neither
// has provisioned, neither is refused: a set that merely came first (with
// credentials that do not work, say) must not squat a name another
// namespace's working set needs; the broker's mark decides which one gets
// the users, and the other is refused here once the first provisioned. Refusing rather than waiting
// keeps retirement simple: generation users belong to one set, so only
// that set's consumers can hold them and retirement waits for no other set
// (scopeMoved). The one user several sets may hold is an adopted one, and
// each set lets go of it on its own (its mark), the last one deleting it.
func uniqueUsers(ctx context.Context, cs *v1.CredentialSet, b *rabbitmq.Backend, sets []v1.CredentialSet) error {
	if cs.Status.KeyGeneration > 0 {
		return nil
	}
	norm := func(e string) string { return strings.ToLower(strings.TrimRight(e, "/")) }
	me := cs.Spec.RabbitMQ
	myCluster := cs.Status.Cluster
	for i := range sets {
		o := &sets[i]
		if o.UID == cs.UID || o.Spec.RabbitMQ == nil || !precedes(o, cs) {
			continue
		}
		what := clash(me, o.Spec.RabbitMQ)
		if what == "" {
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
			where = fmt.Sprintf("RabbitMQ cluster %s", myCluster)
		}
		return &registry.SpecError{Msg: fmt.Sprintf("%s %s on %s, and it provisioned first; two sets would make the same users, so this set changed nothing: give this set another rabbitmq.user.base (it then starts by itself, as it does once that set is deleted)",
			registry.OtherSet(cs, o), what, where)}
	}
	return nil
}

// clash says how two sets' users collide, "" when they do not. Two
// sets adopting the same user is no clash: they share it.
func clash(me, o *v1.RabbitMQSpec) string {
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

// precedes: o keeps clashing names rather than cs — it provisioned and
// cs has not, or both have and o was created first (its UID breaks a tie
// within the same second). A set that never provisioned precedes nothing.
func precedes(o, cs *v1.CredentialSet) bool {
	if op, cp := o.Status.KeyGeneration > 0, cs.Status.KeyGeneration > 0; op != cp || !op {
		return op
	}
	if !o.CreationTimestamp.Equal(&cs.CreationTimestamp) {
		return o.CreationTimestamp.Before(&cs.CreationTimestamp)
	}
	return o.UID < cs.UID
}
