package explorer

// Two sets on one broker (options RabbitMQ and TwoSets): a second set,
// db2, on the same broker as db, as two teams' sets on one shared
// RabbitMQ are. It has its own user base (shop: its generations are
// shop-g<N>, each carrying db2's mark), its own consumer (Deployment
// app/web2, one pod) and distribution Secret (app/db2-creds), and
// deletionPolicy Delete; it connects as the broker's admin, which neither
// set rotates. Specs whose users would collide (the same user.base, or an
// adopted user that is one of the other's generations) are refused before
// either changes anything, by rabbitkube's uniqueUsers (TestClash), so the
// world explores sets with bases of their own. Each set's backend lists,
// sweeps, retires, resets, releases and deletes only users named after its
// own base and carrying its own mark, so neither touches the other's:
// TestTwoBasesOnRealBroker (internal/backend/rabbitmq
// twosets_model_test.go) proves it on a real rabbitmq-server, each set's
// every operation interleaved with the other's. What this world checks is
// the rest: whatever each set does, crashes included, every invariant
// holds for each set in every state.
const (
	// RabbitBaseAnnotation is spec.rabbitmq.user.base in the model (app
	// without it).
	RabbitBaseAnnotation = "explorer.rekey.io/rabbitmq-base"
	// rabbitPeerBase is db2's.
	rabbitPeerBase = "shop"
)

// rabbitPeer makes p, the second set, a RabbitMQ set on the broker with
// base shop.
func rabbitPeer(p *World) {
	p.Set.Annotations[Annotation] = RabbitWorld
	p.Set.Annotations[RabbitBaseAnnotation] = rabbitPeerBase
}
