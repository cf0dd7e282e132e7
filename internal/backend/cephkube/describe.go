package cephkube

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// describe is how the plugin speaks of Ceph sets. Ceph mints its keys
// (ReadBack); InPlace keeps no old key, Overlapping keeps an entity per
// generation.
var describe = registry.Describe{
	Name:    "Ceph",
	Secrets: "keys",
	Traits: func(cs *v1.CredentialSet) engine.Traits {
		return engine.Traits{ReadBack: true, Overlap: overlapping(cs)}
	},
	Words:        words,
	Plan:         plan,
	RenderedKeys: renderedKeys,
	MoreSecrets:  moreSecrets,
	Then:         then,
	Show: registry.Show{Formats: []string{"plain", "keyring", "env"}, Credential: credential,
		Pick: &registry.PickFlag{Flag: "entity", Noun: "entity", Form: "e.g. client.csi", Choices: entityNames}},
	Repairs: []registry.Repair{{
		Reason: reason.DualPasswordExists,
		Cause:  "a Ceph entity of a newer generation than the current one exists, which the set's status does not account for (a status restored from a backup?), so rotations are refused",
		Help:   "a Ceph entity of a newer generation exists:\nthe cluster is reset to the current keys",
		Held:   "a newer generation's entity the status does not account for still authenticates",
		LetGo:  "leaving both entities",
	}},
	Help: registry.Help{
		Rotate:  "Overlapping: a new entity per generation next to the current one;\nInPlace: ceph auth rotate, after which the old key no longer works",
		Abort:   "Overlapping: the new generation's entities are deleted;\nInPlace: only before Ceph rotated a key (after that the old key\nis gone and the rotation can only complete)",
		Discard: "Overlapping: prior entities beyond keepPriorKeyCount are deleted;\nInPlace: nothing left to retire (the old keys stopped working\nwhen Ceph rotated them), discard completes the rotation",
		Show:    "plain (the key), keyring (the keyring file), env (CEPH_NAME, the\nentity for --name; CEPH_ID, for --id; CEPH_KEY); --entity picks\nthe entity when the set has several",
		Check:   "the ceph auth caps command that gives the admin entity the\nmon caps it lacks",
		Recover: "mints its own keys, so an idle Ceph set with KeyMismatch or\nPendingRejected is not reset: follow the operator's message\n(delete the entity from the source Secret)",
	},
	Rank: 2,
}

func words(cs *v1.CredentialSet) registry.Words {
	if overlapping(cs) {
		keep := cs.Spec.Ceph.PriorKeysKept()
		return registry.Words{
			Applying:       "new entities are being created",
			Rotating:       "wait: applying new keys",
			BothWork:       "the current and the new entities both work until discard",
			RetireWait:     "the operator completes the rotation once every consumer has rolled out (%s now), keeping " + priorEntities(keep) + " (keepPriorKeyCount)",
			Retired:        fmt.Sprintf("prior entities beyond keepPriorKeyCount %d were removed", keep),
			Retiring:       "wait: prior entities removed, completing the rotation",
			AutoDiscard:    "discard happens automatically",
			AlreadyRetired: "already removed the prior entities",
			RollbackSafe:   "until step 4 Ceph holds both the current and the new entities, so no consumer loses its login",
			Reset:          "once every consumer rolled out, the entities newer than the current generation (" + strings.Join(newEntities(cs), ", ") + ") are deleted from Ceph: their keys stop working",
			ResetDone:      "Ceph holds no entity newer than the current generation",
			SourceNote:     "the new keys Ceph mints are read back into it",
		}
	}
	return registry.Words{
		Applying:       "Ceph is rotating the keys in place",
		Rotating:       "wait: applying new keys",
		BothWork:       "the old keys stopped working when Ceph rotated them (InPlace); discard completes the rotation",
		RetireWait:     "the operator completes the rotation once every consumer has rolled out (%s now); the old keys already stopped working when Ceph rotated them (InPlace)",
		Retired:        "the old keys stopped working when Ceph rotated them (InPlace)",
		Retiring:       "wait: completing the rotation",
		AutoDiscard:    "discard happens automatically",
		AlreadyRetired: "already completed its discard",
		RollbackSafe:   "the current keys keep working as long as Ceph has not rotated them; if it already rotated a key of this rotation, the operator refuses the rollback (AbortSkipped): an InPlace rotation can then only complete",
		Reset:          "once every consumer rolled out, the operator checks that Ceph still holds the current keys (InPlace deletes nothing: a key Ceph rotated cannot be brought back, and the operator then refuses with KeyMismatch)",
		ResetDone:      "Ceph holds the current keys",
		SourceNote:     "the new keys Ceph mints are read back into it",
	}
}

// overlapping: the set rotates by a new entity per generation.
func overlapping(cs *v1.CredentialSet) bool {
	return cs.Spec.Ceph.RotationStrategy() == v1.CephOverlapping
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

// newEntities names the target generation of every entity.
func newEntities(cs *v1.CredentialSet) []string {
	gen := engine.TargetGeneration(cs.Spec.Rotation, cs.Status)
	var out []string
	for _, e := range cs.Spec.Ceph.Entities {
		out = append(out, ceph.GenerationEntity(e.Name, gen))
	}
	return out
}

// plan says where rekey runs the ceph CLI, how the strategy keeps (or does
// not keep) the old keys, and the entities it rotates.
func plan(_ context.Context, out io.Writer, cs *v1.CredentialSet, _ registry.Reader) error {
	spec := cs.Spec.Ceph
	fmt.Fprintf(out, "Monitors (%d; rekey runs the ceph CLI as %s, keyring from Secret %s/%s):\n",
		len(spec.Monitors), cs.Spec.Ceph.AdminEntity(), cs.Namespace, spec.Admin.KeyringSecretRef.Name)
	for _, m := range spec.Monitors {
		fmt.Fprintf(out, "  %s\n", m)
	}
	gen := engine.TargetGeneration(cs.Spec.Rotation, cs.Status)
	if overlapping(cs) {
		fmt.Fprintf(out, "Strategy Overlapping: each entity gets a new entity for generation %d with the same caps, next to the current one; both work until discard (keepPriorKeyCount %d says how many prior entities stay after it).\n", gen, cs.Spec.Ceph.PriorKeysKept())
	} else {
		// The one exception to "never lock out anyone", so it is said
		// before anything else about the entities.
		fmt.Fprintln(out, "Strategy InPlace: ceph auth rotate replaces each key. Unlike MySQL, the old key stops working at once, at rotate time, not at discard; the consumers restart right after, and running daemons carry on on their service tickets meanwhile.")
	}
	fmt.Fprintf(out, "Entities (%d):\n", len(spec.Entities))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, e := range spec.Entities {
		line := "  " + e.Name
		if overlapping(cs) {
			line += fmt.Sprintf("\tnew entity %s.%d\t%s", e.Name, gen, capsText(e.Caps))
		}
		if e.Name == cs.Spec.Ceph.AdminEntity() {
			line += "\t(rekey connects as this entity; its key rotates through " + ceph.RotatorEntity + ")"
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// capsText lists the caps a new entity is created with, as `ceph auth
// get-or-create` takes them on a shell command line.
func capsText(c v1.CephCaps) string {
	var parts []string
	for _, p := range []struct{ daemon, caps string }{{"mon", c.Mon}, {"osd", c.OSD}, {"mgr", c.MGR}, {"mds", c.MDS}} {
		if p.caps != "" {
			parts = append(parts, p.daemon+" "+registry.Quoted(p.caps))
		}
	}
	if len(parts) == 0 {
		return "no caps"
	}
	return "caps " + strings.Join(parts, " ")
}

// renderedKeys are the keys Render writes per entity.
func renderedKeys(*v1.CredentialSet) string {
	const e = "E"
	return fmt.Sprintf("%s, %s, %s and %s for each entity %s", ceph.KeyringKey(e), ceph.KeyKey(e), ceph.NameKey(e), ceph.IDKey(e), e)
}

// moreSecrets is the admin keyring Secret when the set rotates the admin.
func moreSecrets(cs *v1.CredentialSet) []string {
	admin := cs.Spec.Ceph.AdminEntity()
	for _, e := range cs.Spec.Ceph.Entities {
		if e.Name == admin {
			ref := cs.Spec.Ceph.Admin.KeyringSecretRef.Name
			return []string{fmt.Sprintf("admin keyring Secret %s/%s (%s is one of the entities; while it rotates, the temporary %s's keyring is kept in %s/%s)",
				cs.Namespace, ref, admin, ceph.RotatorEntity, cs.Namespace, ceph.RotatorSecretName(ref))}
		}
	}
	return nil
}

// then says what discard does to prior entities, or that InPlace left
// nothing to do.
func then(cs *v1.CredentialSet, d registry.Discard) string {
	switch {
	case overlapping(cs) && cs.Spec.Ceph.PriorKeysKept() == 0:
		return fmt.Sprintf("Then: %s; discard deletes the prior entities (keepPriorKeyCount 0), so their keys stop working.", d.When())
	case overlapping(cs):
		return fmt.Sprintf("Then: %s; discard keeps %s (keepPriorKeyCount) and deletes older ones.", d.When(), priorEntities(cs.Spec.Ceph.PriorKeysKept()))
	}
	return fmt.Sprintf("Then: %s; discard retires nothing, the old keys are already gone since rotate (InPlace).", d.When())
}
