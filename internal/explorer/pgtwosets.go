package explorer

// Two sets on one PostgreSQL cluster (options Postgres and TwoSets): a
// second set, db2, on the same primary and replica as db, as two teams'
// sets on one shared cluster are. It has its own login (base shop, its
// generations shop_g<N>, members of its own group shop_owner, each
// carrying db2's mark), its own consumer (Deployment app/web2, one pod)
// and distribution Secret (app/db2-creds), and deletionPolicy Delete; it
// connects as the cluster's admin, which neither set rotates. Each set's
// backend lists, sweeps, retires, resets, releases and drops only the
// roles named after its own base that carry its own mark (the owner mark
// holds the set's UID: generations.go, roles.go), so neither touches the
// other's roles (the model's sessions of a role are its own set's pod's:
// a drop of the other's role, with the other's pod on it, is never tried):
// TestModelTwoSets (internal/backend/postgres model_twosets_test.go)
// proves it on a real primary and replica, each set's every operation
// interleaved with the other's, and shows that a set whose base is the
// other's is refused (NotOwned) rather than change the other's role. The
// model's mark is one flag, so it explores sets with bases of their own;
// the outside client (pgclient.go) is db's. What this world checks is the
// rest: whatever each set does, crashes included, every invariant holds
// for each set in every state.
const (
	// PostgresBaseAnnotation is spec.postgres.login.base in the model
	// (app without it), the group being <base>_owner.
	PostgresBaseAnnotation = "explorer.rekey.io/postgres-base"
	// pgPeerBase is db2's.
	pgPeerBase = "shop"
)

// pgPeer makes p, the second set, a PostgreSQL set on w's cluster with
// base shop, whose group the cluster has before rekey.
func pgPeer(w, p *World) {
	p.Set.Annotations[Annotation] = PostgresWorld
	p.Set.Annotations[PostgresBaseAnnotation] = pgPeerBase
	for _, in := range w.Instances {
		in.set(pgPeerBase+"_owner", Account{Exists: true})
	}
}

// pgMine: k is one of the generations of the world's set's logins.
func pgMine(w *World, k string) bool {
	for _, l := range pgLoginsOf(w.Set) {
		if _, ok := pgGenerationOf(l.base, k); ok {
			return true
		}
	}
	return false
}
