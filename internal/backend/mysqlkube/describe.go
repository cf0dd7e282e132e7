package mysqlkube

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/mysql"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/moco"
	"rekey.io/rekey/internal/reason"
)

// describe is how the plugin speaks of MySQL sets; its words are the
// plugin's original ones, unchanged.
var describe = registry.Describe{
	Name:    "MySQL",
	Secrets: "passwords",
	// MySQL keeps the current password next to the new one (dual
	// passwords) until discard.
	Traits:  func(*v1.CredentialSet) engine.Traits { return engine.Traits{Overlap: true, AddsAtRest: true} },
	Resolve: asMOCO,
	Words: func(*v1.CredentialSet) registry.Words {
		return registry.Words{
			Applying:       "new passwords are being applied",
			Rotating:       "wait: applying new passwords",
			BothWork:       "old and new passwords both work until discard",
			RetireWait:     "the operator discards the old passwords once every consumer has rolled out (%s now)",
			Retired:        "the old passwords no longer work",
			Retiring:       "wait: old passwords discarded, completing the rotation",
			AutoDiscard:    "discard happens automatically",
			AlreadyRetired: "already discarded the old passwords on every instance",
			RollbackSafe:   "until step 4 MySQL accepts the current and the new passwords, so no consumer loses its login",
			Reset:          "once every consumer rolled out, every instance is reset to the current passwords (ALTER USER ... IDENTIFIED BY, then ALTER USER ... DISCARD OLD PASSWORD): any other password stops working",
			ResetDone:      "every instance accepts only the current passwords",
			SourceNote:     "new passwords are stored there first",
		}
	},
	Plan: plan,
	Then: then,
	Show: registry.Show{Formats: []string{"plain", "mycnf", "env"}, Unqualified: true, Credential: credential,
		Pick: &registry.PickFlag{Flag: "user", Noun: "user", Form: "NAME or NAME@HOST", Choices: userChoices}},
	Repairs: []registry.Repair{{
		Reason: reason.DualPasswordExists,
		Cause:  "a MySQL user has a secondary password that rekey did not set, so rotations are refused",
		Help:   "a MySQL user has a secondary password rekey did not set:\nMySQL is reset to the current passwords",
		Held:   "a second password the status does not account for is still valid",
		LetGo:  "leaving both",
	}},
	Help: registry.Help{
		Rotate:  "new passwords on every instance next to the current ones (dual\npasswords); the old ones work until discard",
		Abort:   "every instance: ALTER USER ... IDENTIFIED BY, then DISCARD OLD\nPASSWORD; until then MySQL accepts both passwords",
		Discard: "DISCARD OLD PASSWORD on every instance",
		Show:    "plain (the password), mycnf ([client] section), env (MYSQL_USER /\nMYSQL_PASSWORD); --user picks the user when the set has several",
		Check:   "the GRANT that adds each privilege the admin lacks",
	},
	Rank: 1,
}

// asMOCO is a mysql.moco set as the operator sees it: MOCO's instances,
// admin and users, and, when the set names no distribution target, MOCO's
// user Secret (moco-<cluster>, the 8 passwords under MOCO's keys) as the
// Secret that holds its passwords. Other sets are returned as they are.
func asMOCO(cs *v1.CredentialSet) *v1.CredentialSet {
	if cs.Spec.MySQL == nil || cs.Spec.MySQL.MOCO == nil {
		return cs
	}
	out := cs.DeepCopy()
	out.Spec.MySQL = moco.DerivedSpec(cs.Spec.MySQL)
	if len(out.Spec.Distribution) == 0 {
		n := moco.NamesOf(cs.Namespace, cs.Spec.MySQL.MOCO.ClusterName)
		out.Spec.Distribution = []v1.SecretTarget{{Namespace: cs.Namespace, Name: n.UserSecret}}
	}
	return out
}

// plan lists the instances and users a rotation changes.
func plan(ctx context.Context, out io.Writer, cs *v1.CredentialSet, r registry.Reader) error {
	cs = asMOCO(cs)
	instances, note, err := planInstances(ctx, cs, r)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Instances (%d, each gets ALTER USER ... RETAIN CURRENT PASSWORD; role read live by the operator):\n", len(instances))
	for _, i := range instances {
		fmt.Fprintf(out, "  %s\n", i)
	}
	if note != "" {
		fmt.Fprintf(out, "  %s\n", note)
	}
	users, err := mysql.ResolveUsers(cs.Spec.MySQL)
	if err != nil {
		fmt.Fprintf(out, "Users: none usable: %v\n", err)
		return nil
	}
	fmt.Fprintf(out, "Users (%d):\n", len(users))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, u := range users {
		admin := ""
		if u.Name == cs.Spec.MySQL.Admin.User {
			admin = "\t(rekey connects as this user)"
		}
		fmt.Fprintf(tw, "  %s\tkey %s%s\n", u, u.Key, admin)
	}
	return tw.Flush()
}

// planInstances lists instance addresses as build derives them: hosts as
// given, or one DNS name per StatefulSet ordinal below spec.replicas. note
// explains an empty list.
func planInstances(ctx context.Context, cs *v1.CredentialSet, r registry.Reader) ([]string, string, error) {
	in := cs.Spec.MySQL.Instances
	if in.StatefulSet == nil {
		return in.Hosts, "", nil
	}
	ref := in.StatefulSet
	sts, err := r.StatefulSet(ctx, ref.Name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("StatefulSet %s/%s does not exist: the operator cannot rotate until it does", cs.Namespace, ref.Name), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read StatefulSet %s/%s: %w", cs.Namespace, ref.Name, err)
	}
	if sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0 {
		return nil, fmt.Sprintf("StatefulSet %s/%s has replicas: 0: the operator refuses to rotate until it is scaled up", cs.Namespace, ref.Name), nil
	}
	var out []string
	for _, i := range mysql.StatefulSetInstances(sts, *ref) {
		out = append(out, i.Addr)
	}
	return out, "", nil
}

// then is the plan's closing line in MySQL's original words.
func then(_ *v1.CredentialSet, d registry.Discard) string {
	switch {
	case d.Auto:
		return "Then: the old passwords are discarded automatically once every consumer rolled out and the grace period passed (discardPolicy AfterRollout)."
	case d.Held:
		return fmt.Sprintf("Then: discardPolicy AfterRollout, but the set declares no consumer, so the operator does not discard by itself: once every client uses the new passwords, run %s.", d.Command)
	}
	return fmt.Sprintf("Then: once consumers rolled out and work, run %s (discardPolicy Manual).", d.Command)
}
