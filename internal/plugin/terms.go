package plugin

import (
	"fmt"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
)

// terms is how messages describe a set's backend. The three backends keep
// old credentials alive in different ways (MySQL: a second password;
// Ceph InPlace: not at all; Ceph Overlapping: an entity per generation;
// RabbitMQ: a user per generation), so "the old passwords work until
// discard" is true of one and false of another. Every message that says
// what happens to old or new credentials takes its words from here.
type terms struct {
	// applying is the phase Rotating in words.
	applying string
	// bothWork says what works once a rotation is distributed.
	bothWork string
	// retireWait says what discard waits for, with the consumer count.
	retireWait string
	// retired says what discard did.
	retired string
	// retiring is the next step while discard finishes.
	retiring string
	// alreadyRetired is why a rotation can no longer be rolled back.
	alreadyRetired string
	// rollbackSafe is why abort's first steps lock no one out.
	rollbackSafe string
	// reset is the step that makes the backend accept only the current
	// credentials again, and resetDone says it happened.
	reset, resetDone string
}

// termsFor picks the words for cs's backend. MySQL's are the plugin's
// original wording, unchanged.
func termsFor(cs *v1.CredentialSet) terms {
	switch {
	case cs.Spec.Ceph != nil && cephOverlapping(cs):
		keep := keepPriorKeyCount(cs)
		return terms{
			applying:       "new entities are being created",
			bothWork:       "the current and the new entities both work until discard",
			retireWait:     "the operator completes the rotation once every consumer has rolled out (%s now), keeping " + priorEntities(keep) + " (keepPriorKeyCount)",
			retired:        fmt.Sprintf("prior entities beyond keepPriorKeyCount %d were removed", keep),
			retiring:       "wait: prior entities removed, completing the rotation",
			alreadyRetired: "already removed the prior entities",
			rollbackSafe:   "until step 4 Ceph holds both the current and the new entities, so no consumer loses its login",
			reset:          "once every consumer rolled out, the entities newer than the current generation (" + strings.Join(newEntities(cs), ", ") + ") are deleted from Ceph: their keys stop working",
			resetDone:      "Ceph holds no entity newer than the current generation",
		}
	case cs.Spec.Ceph != nil:
		return terms{
			applying:       "Ceph is rotating the keys in place",
			bothWork:       "the old keys stopped working when Ceph rotated them (InPlace); discard completes the rotation",
			retireWait:     "the operator completes the rotation once every consumer has rolled out (%s now); the old keys already stopped working when Ceph rotated them (InPlace)",
			retired:        "the old keys stopped working when Ceph rotated them (InPlace)",
			retiring:       "wait: completing the rotation",
			alreadyRetired: "already completed its discard",
			rollbackSafe:   "the current keys keep working as long as Ceph has not rotated them; if it already rotated a key of this rotation, the operator refuses the rollback (AbortSkipped): an InPlace rotation can then only complete",
			reset:          "once every consumer rolled out, the operator checks that Ceph still holds the current keys (InPlace deletes nothing: a key Ceph rotated cannot be brought back, and the operator then refuses with KeyMismatch)",
			resetDone:      "Ceph holds the current keys",
		}
	case cs.Spec.RabbitMQ != nil:
		return terms{
			applying:       "the new user is being created",
			bothWork:       "the old and the new user both work until discard",
			retireWait:     "the operator deletes the old user once every consumer of this set has moved (%s now)",
			retired:        "the old user was deleted",
			retiring:       "wait: old user deleted, completing the rotation",
			alreadyRetired: "already deleted the old user",
			rollbackSafe:   "until step 4 RabbitMQ has both the current and the new user, so no consumer loses its login",
			reset:          "once every consumer rolled out, the current user gets the source Secret's password, tags and permissions again (recreated if missing), then every other " + cs.Spec.RabbitMQ.User.Base + "-g<N> user, the new one among them, is deleted",
			resetDone:      "RabbitMQ has only the current user",
		}
	}
	return terms{
		applying:       "new passwords are being applied",
		bothWork:       "old and new passwords both work until discard",
		retireWait:     "the operator discards the old passwords once every consumer has rolled out (%s now)",
		retired:        "the old passwords no longer work",
		retiring:       "wait: old passwords discarded, completing the rotation",
		alreadyRetired: "already discarded the old passwords on every instance",
		rollbackSafe:   "until step 4 MySQL accepts the current and the new passwords, so no consumer loses its login",
		reset:          "once every consumer rolled out, every instance is reset to the current passwords (ALTER USER ... IDENTIFIED BY, then ALTER USER ... DISCARD OLD PASSWORD): any other password stops working",
		resetDone:      "every instance accepts only the current passwords",
	}
}

// backendName and secretWord keep messages in the backend's own terms.
func backendName(cs *v1.CredentialSet) string {
	switch {
	case cs.Spec.Ceph != nil:
		return "Ceph"
	case cs.Spec.RabbitMQ != nil:
		return "RabbitMQ"
	default:
		return "MySQL"
	}
}

func secretWord(cs *v1.CredentialSet) string {
	if cs.Spec.Ceph != nil {
		return "keys"
	}
	return "passwords"
}

// traits are the engine.Traits of the set's backend that the plugin's
// questions to the engine depend on: every backend but Ceph InPlace keeps
// the old secrets valid next to the new ones until discard (Overlap).
func traits(cs *v1.CredentialSet) engine.Traits {
	return engine.Traits{Overlap: cs.Spec.Ceph == nil || cephOverlapping(cs)}
}

// cephOverlapping: the set rotates by a new entity per generation; the
// API's default strategy is InPlace.
func cephOverlapping(cs *v1.CredentialSet) bool {
	return cs.Spec.Ceph != nil && cs.Spec.Ceph.Strategy == v1.CephOverlapping
}

// keepPriorKeyCount applies the API's default of 1.
func keepPriorKeyCount(cs *v1.CredentialSet) int32 {
	if k := cs.Spec.Ceph.KeepPriorKeyCount; k != nil {
		return *k
	}
	return 1
}

// priorEntities says how many prior entities discard keeps, in words.
func priorEntities(keep int32) string {
	switch keep {
	case 0:
		return "no prior entity"
	case 1:
		return "each entity's newest prior entity"
	}
	return fmt.Sprintf("each entity's %d newest prior entities", keep)
}

// targetGeneration is the generation the active rotation produces, or the
// one a rotation starting now would, as the operator computes it.
func targetGeneration(cs *v1.CredentialSet) int64 {
	return engine.TargetGeneration(cs.Spec.Rotation, cs.Status)
}

// newEntities names generation targetGeneration of every Overlapping
// entity.
func newEntities(cs *v1.CredentialSet) []string {
	gen := targetGeneration(cs)
	var out []string
	for _, e := range cs.Spec.Ceph.Entities {
		out = append(out, naming.CephGenerationEntity(e.Name, gen))
	}
	return out
}

// rabbitUser names a generation's user.
func rabbitUser(cs *v1.CredentialSet, gen int64) string {
	return naming.RabbitMQUser(cs.Spec.RabbitMQ.User.Base, gen)
}
