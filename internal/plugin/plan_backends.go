package plugin

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/naming"
)

// printCephPlan says where rekey runs the ceph CLI, how the strategy keeps
// (or does not keep) the old keys, and the entities it rotates.
func printCephPlan(out io.Writer, cs *v1.CredentialSet) {
	spec := cs.Spec.Ceph
	fmt.Fprintf(out, "Monitors (%d; rekey runs the ceph CLI as %s, keyring from Secret %s/%s):\n",
		len(spec.Monitors), cephAdmin(cs), cs.Namespace, spec.Admin.KeyringSecretRef.Name)
	for _, m := range spec.Monitors {
		fmt.Fprintf(out, "  %s\n", m)
	}
	gen := targetGeneration(cs)
	if cephOverlapping(cs) {
		fmt.Fprintf(out, "Strategy Overlapping: each entity gets a new entity for generation %d with the same caps, next to the current one; both work until discard (keepPriorKeyCount %d says how many prior entities stay after it).\n", gen, keepPriorKeyCount(cs))
	} else {
		// The one exception to "never lock out anyone", so
		// it is said before anything else about the entities.
		fmt.Fprintln(out, "Strategy InPlace: ceph auth rotate replaces each key. Unlike MySQL, the old key stops working at once, at rotate time, not at discard; the consumers restart right after, and running daemons carry on on their service tickets meanwhile.")
	}
	fmt.Fprintf(out, "Entities (%d):\n", len(spec.Entities))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, e := range spec.Entities {
		line := "  " + e.Name
		if cephOverlapping(cs) {
			line += fmt.Sprintf("\tnew entity %s.%d\t%s", e.Name, gen, capsText(e.Caps))
		}
		if e.Name == cephAdmin(cs) {
			line += "\t(rekey connects as this entity; its key rotates through " + naming.CephRotatorEntity + ")"
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// capsText lists the caps a new entity is created with, as `ceph auth
// get-or-create` takes them on a shell command line.
func capsText(c v1.CephCaps) string {
	var parts []string
	for _, p := range []struct{ daemon, caps string }{{"mon", c.Mon}, {"osd", c.OSD}, {"mgr", c.MGR}, {"mds", c.MDS}} {
		if p.caps != "" {
			parts = append(parts, p.daemon+" "+quoted(p.caps))
		}
	}
	if len(parts) == 0 {
		return "no caps"
	}
	return "caps " + strings.Join(parts, " ")
}

// quoted is s in single quotes, as a shell reads it: the regular
// expressions of RabbitMQ permissions keep their backslashes, and an empty
// one ("grants nothing") stays visible.
func quoted(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// cephAdmin is the entity rekey runs as, with the API's default.
func cephAdmin(cs *v1.CredentialSet) string {
	if e := cs.Spec.Ceph.Admin.Entity; e != "" {
		return e
	}
	return "client.admin"
}

// cephAdminRotates is the admin entity when the set rotates it, else "":
// then the admin keyring Secret is rewritten too.
func cephAdminRotates(cs *v1.CredentialSet) string {
	if cs.Spec.Ceph == nil {
		return ""
	}
	admin := cephAdmin(cs)
	if slices.ContainsFunc(cs.Spec.Ceph.Entities, func(e v1.CephEntity) bool { return e.Name == admin }) {
		return admin
	}
	return ""
}

// printRabbitPlan says where rekey reaches the broker and the user the
// rotation creates, with what it is allowed to do.
func printRabbitPlan(out io.Writer, cs *v1.CredentialSet) {
	spec := cs.Spec.RabbitMQ
	fmt.Fprintf(out, "Endpoint: %s (management API; rekey acts as the user in Secret %s/%s)\n", spec.Endpoint, cs.Namespace, spec.Admin.SecretRef.Name)
	fmt.Fprintf(out, "New user: %s, created next to the current one (a new user <base>-g<N> per generation); both work until discard\n", rabbitUser(cs, targetGeneration(cs)))
	if len(spec.User.Tags) == 0 {
		fmt.Fprintln(out, "Tags: none")
	} else {
		fmt.Fprintf(out, "Tags: %s\n", strings.Join(spec.User.Tags, ", "))
	}
	if len(spec.User.Permissions) == 0 {
		fmt.Fprintln(out, "Permissions: none (spec.rabbitmq.user.permissions is empty)")
	} else {
		fmt.Fprintln(out, "Permissions:")
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, p := range spec.User.Permissions {
			fmt.Fprintf(tw, "  vhost %s\tconfigure %s\twrite %s\tread %s\n", p.Vhost, quoted(p.Configure), quoted(p.Write), quoted(p.Read))
		}
		tw.Flush()
	}
	if len(spec.User.TopicPermissions) > 0 {
		fmt.Fprintln(out, "Topic permissions:")
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, p := range spec.User.TopicPermissions {
			fmt.Fprintf(tw, "  vhost %s\texchange %s\twrite %s\tread %s\n", p.Vhost, p.Exchange, quoted(p.Write), quoted(p.Read))
		}
		tw.Flush()
	}
}

// sourceNote says how new secrets reach the source Secret (stored before
// any backend accepts them): a
// backend that keeps only hashes gets them from there; Ceph mints its keys
// and they are read back from it.
func sourceNote(cs *v1.CredentialSet) string {
	switch {
	case cs.Spec.Ceph != nil:
		return "the new keys Ceph mints are read back into it"
	case cs.Spec.RabbitMQ != nil:
		return "the new user's password is stored there before the user is created"
	}
	return "new passwords are stored there first"
}

// distributedKeys lists the keys the backends render into each
// distribution Secret (MySQL's are listed with its users).
func distributedKeys(cs *v1.CredentialSet) string {
	switch {
	case cs.Spec.Ceph != nil:
		const e = "E"
		return fmt.Sprintf("%s, %s, %s and %s for each entity %s", naming.CephKeyringKey(e), naming.CephKeyKey(e), naming.CephNameKey(e), naming.CephIDKey(e), e)
	case cs.Spec.RabbitMQ != nil:
		keys := []string{naming.RabbitMQUsernameKey, naming.RabbitMQPasswordKey}
		if t := cs.Spec.RabbitMQ.TransportURL; t != nil {
			keys = append(keys, transportKey(t))
		}
		if f := cs.Spec.RabbitMQ.ConfigFile; f != nil {
			keys = append(keys, f.Key)
		}
		return strings.Join(keys, ", ")
	}
	return ""
}

// transportKey is the Secret key of the transport_url, with the API's
// default.
func transportKey(t *v1.RabbitMQTransportURL) string {
	return cmp.Or(t.Key, naming.RabbitMQTransportURLKey)
}

// printBackendThen says what discard does for Ceph and RabbitMQ, which is
// where they differ most from MySQL.
func printBackendThen(out io.Writer, cs *v1.CredentialSet, ns string) {
	auto := autoDiscards(cs)
	when := fmt.Sprintf("once consumers rolled out and work, run kubectl rekey discard %s -n %s (discardPolicy Manual)", cs.Name, ns)
	if cs.Spec.Rotation.DiscardPolicy == v1.DiscardAfterRollout && !auto {
		when = fmt.Sprintf("once every client uses the new credentials, run kubectl rekey discard %s -n %s (discardPolicy AfterRollout, but no consumer is declared, so the operator does not discard by itself)", cs.Name, ns)
	}
	if auto {
		when = "once every consumer rolled out and the grace period passed, the rotation completes automatically (discardPolicy AfterRollout)"
	}
	switch {
	case cs.Spec.RabbitMQ != nil:
		fmt.Fprintf(out, "Then: %s. The old user is deleted once every consumer of this set moved to the new one (status.retirementWaitsFor lists those that have not).\n", when)
	case cephOverlapping(cs) && keepPriorKeyCount(cs) == 0:
		fmt.Fprintf(out, "Then: %s; discard deletes the prior entities (keepPriorKeyCount 0), so their keys stop working.\n", when)
	case cephOverlapping(cs):
		fmt.Fprintf(out, "Then: %s; discard keeps %s (keepPriorKeyCount) and deletes older ones.\n", when, priorEntities(keepPriorKeyCount(cs)))
	default:
		fmt.Fprintf(out, "Then: %s; discard retires nothing, the old keys are already gone since rotate (InPlace).\n", when)
	}
}

// formatNote says what a target in a ceph-csi format holds.
func formatNote(cs *v1.CredentialSet, t v1.SecretTarget) string {
	if !t.Format.CephCSI() {
		return ""
	}
	e, err := naming.CephCSIEntity(cs, t)
	if err != nil {
		return " (" + err.Error() + ")"
	}
	keys := "userID, userKey"
	if t.Format == v1.FormatCephCSIWithAdmin {
		keys += ", adminID, adminKey"
	}
	return fmt.Sprintf(" (%s: %s of %s's current generation)", t.Format, keys, e)
}

// formatted: some target is in a ceph-csi format.
func formatted(cs *v1.CredentialSet) bool {
	for _, t := range cs.Spec.Distribution {
		if t.Format.CephCSI() {
			return true
		}
	}
	return false
}
