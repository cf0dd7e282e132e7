package explorer

// Two sets on one Ceph cluster (options Ceph and TwoSets): a second set,
// db2, on the same monitor as db, as two teams' sets on one shared
// cluster are. It rotates an entity of its own, client.shop, Overlapping
// (its generations client.shop.<N>, each recorded for db2), with its own
// consumer (Deployment app/web2, one pod) and distribution Secret
// (app/db2-creds), and deletionPolicy Delete; it connects as the cluster's
// admin, which neither set rotates. Specs that would share an entity (the
// same name, one generation's name the other's base, or one set rotating
// the other's admin entity) are refused before either changes anything,
// by cephkube with ceph.Clash and ceph.AdminClash (TestClash,
// TestAdminClash), so the world explores sets with entities of their
// own. Each set's backend lists,
// removes, resets, releases and deletes only its own entities'
// generations, and only those whose ownership record carries its own
// UID (owner.go): TestTwoSetsOnRealMon (internal/backend/ceph
// twosets_model_test.go) proves it on a real ceph-mon, each set's every
// operation interleaved with the other's. The model's record is one flag
// (Account.Marked), so, as the PostgreSQL two-set world does, it relies
// on the entities' names to tell the sets apart. What this world checks
// is the rest: whatever each set does, crashes included, every invariant
// holds for each set in every state.
const (
	// CephEntityAnnotation is the one entity of a Ceph set in the model
	// (spec.ceph.entities[0].name; client.app without it).
	CephEntityAnnotation = "explorer.rekey.io/ceph-entity"
	// cephPeerBase is db2's.
	cephPeerBase = "client.shop"
)

// cephBases are every entity the Ceph worlds' sets may rotate.
var cephBases = []string{cephBase, cephBase2, cephPeerBase}

// cephPeer makes p, the second set, an Overlapping Ceph set on the
// monitor rotating client.shop.
func cephPeer(p *World) {
	p.Set.Annotations[Annotation] = CephWorld
	p.Set.Annotations[CephEntityAnnotation] = cephPeerBase
}

// cephMine: entity is a generation of one of the world's set's entities
// (db2's client.shop; db's every other).
func cephMine(w *World, entity string) bool {
	base := cephBaseOf(entity)
	return base != "" && (base == cephPeerBase) == w.Second
}
