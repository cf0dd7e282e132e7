package v1alpha1

// DeletionPolicy says what deleting a CredentialSet does to the backend and
// to the source Secret. Whatever the policy, the distribution Secrets stay
// (consumers keep what they read), and a rotation in flight first completes
// or is aborted: deleting a set never leaves consumers on a secret the
// backend no longer accepts.
//
// +kubebuilder:validation:Enum=Discard;Delete;Retain
type DeletionPolicy string

const (
	// DeletionDiscard (the default): the current credentials stay valid,
	// since consumers run with them; everything else rekey made for the set
	// (prior generations, a second password, pending secrets) goes, rekey's
	// ownership marks are removed, and the source Secret is emptied.
	DeletionDiscard DeletionPolicy = "Discard"
	// DeletionDelete: every identity rekey created for the set is deleted
	// (those it adopted are handed back, as Discard does), once every
	// declared consumer is gone; the source Secret is emptied.
	DeletionDelete DeletionPolicy = "Delete"
	// DeletionRetain: rekey lets go at once, in any phase, and changes
	// nothing: the backend, its marks and the source Secret stay as they
	// are (a rotation in flight stays half done).
	DeletionRetain DeletionPolicy = "Retain"
)

// DefaultDeletionPolicy keeps only what consumers use: the safe choice when
// a set is deleted because it is no longer wanted, and also when it is
// deleted to stop a leak (rotate first, or choose Delete).
const DefaultDeletionPolicy = DeletionDiscard

// OnDeletion is the set's deletion policy, its default applied.
func (s *CredentialSetSpec) OnDeletion() DeletionPolicy {
	if s.DeletionPolicy == "" {
		return DefaultDeletionPolicy
	}
	return s.DeletionPolicy
}
