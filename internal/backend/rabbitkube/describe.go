package rabbitkube

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/rabbitmq"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// describe is how the plugin speaks of RabbitMQ sets: a new user per
// generation, the old one deleted at discard.
var describe = registry.Describe{
	Name:    "RabbitMQ",
	Secrets: "passwords",
	Traits:  func(*v1.CredentialSet) engine.Traits { return engine.Traits{Overlap: true} },
	Words: func(cs *v1.CredentialSet) registry.Words {
		return registry.Words{
			Applying:       "the new user is being created",
			Rotating:       "wait: creating the new user",
			BothWork:       "the old and the new user both work until discard",
			RetireWait:     "the operator deletes the old user once every consumer of this set has moved (%s now)",
			Retired:        "the old user was deleted",
			Retiring:       "wait: old user deleted, completing the rotation",
			AutoDiscard:    "discard happens automatically (the old user is deleted once every consumer of this set moved)",
			DiscardNote:    " (the old user goes once every consumer of this set moved)",
			AlreadyRetired: "already deleted the old user",
			RollbackSafe:   "until step 4 RabbitMQ has both the current and the new user, so no consumer loses its login",
			Reset:          "once every consumer rolled out, the current user gets the source Secret's password, tags and permissions again (recreated if missing), then every other " + cs.Spec.RabbitMQ.User.Base + "-g<N> user, the new one among them, is deleted",
			ResetDone:      "RabbitMQ has only the current user",
			SourceNote:     "the new user's password is stored there before the user is created",
		}
	},
	Plan:         plan,
	RenderedKeys: renderedKeys,
	Then: func(_ *v1.CredentialSet, d registry.Discard) string {
		return fmt.Sprintf("Then: %s. The old user is deleted once every consumer of this set moved to the new one (status.retirementWaitsFor lists those that have not).", d.When())
	},
	Show: registry.Show{Formats: []string{"plain", "env", "url"}, Credential: credential,
		One: "a single user (a new one per generation)"},
	Repairs: []registry.Repair{{
		Reason: reason.DualPasswordExists,
		Cause:  "another generation's RabbitMQ user exists beside the current one, which the set's status does not account for (a status restored from a backup?), so rotations are refused",
		Help:   "a RabbitMQ user of another generation exists:\nthe broker is reset to the current user",
		Held:   "another generation's user the status does not account for still logs in",
		LetGo:  "leaving both users",
	}},
	Help: registry.Help{
		Rotate:  "a new user per generation; the old one works until discard",
		Abort:   "the new generation's user is deleted",
		Discard: "the old user is deleted, once every consumer of this set\nmoved",
		Show:    "plain (the password), env (RABBITMQ_USERNAME / RABBITMQ_PASSWORD),\nurl (the transport_url, for sets that render one)",
		New:     "a RabbitMQ user",
		Check:   "the rabbitmqctl set_user_tags command that gives the admin\nthe tag it lacks",
	},
	Rank: 3,
}

// newUser names the user of the generation the rotation makes.
func newUser(cs *v1.CredentialSet) string {
	return rabbitmq.UserName(cs.Spec.RabbitMQ.User.Base, engine.TargetGeneration(cs.Spec.Rotation, cs.Status))
}

// plan says where rekey reaches the broker and the user the rotation
// creates, with what it is allowed to do.
func plan(_ context.Context, out io.Writer, cs *v1.CredentialSet, _ registry.Reader) error {
	spec := cs.Spec.RabbitMQ
	q := registry.Quoted
	fmt.Fprintf(out, "Endpoint: %s (management API; rekey acts as the user in Secret %s/%s)\n", spec.Endpoint, cs.Namespace, spec.Admin.SecretRef.Name)
	fmt.Fprintf(out, "New user: %s, created next to the current one (a new user <base>-g<N> per generation); both work until discard\n", newUser(cs))
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
			fmt.Fprintf(tw, "  vhost %s\tconfigure %s\twrite %s\tread %s\n", p.Vhost, q(p.Configure), q(p.Write), q(p.Read))
		}
		tw.Flush()
	}
	if len(spec.User.TopicPermissions) > 0 {
		fmt.Fprintln(out, "Topic permissions:")
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, p := range spec.User.TopicPermissions {
			fmt.Fprintf(tw, "  vhost %s\texchange %s\twrite %s\tread %s\n", p.Vhost, p.Exchange, q(p.Write), q(p.Read))
		}
		tw.Flush()
	}
	return nil
}

// renderedKeys are the keys Render writes: username, password and, where
// the spec asks, the transport_url and the config file.
func renderedKeys(cs *v1.CredentialSet) string {
	keys := []string{rabbitmq.KeyUsername, rabbitmq.KeyPassword}
	if t := cs.Spec.RabbitMQ.TransportURL; t != nil {
		keys = append(keys, t.SecretKey())
	}
	if f := cs.Spec.RabbitMQ.ConfigFile; f != nil {
		keys = append(keys, f.Key)
	}
	return strings.Join(keys, ", ")
}

// credential is the set's one user, as show prints it.
func credential(cs *v1.CredentialSet, p registry.Pick) (registry.Credential, error) {
	c := registry.Credential{Who: "the RabbitMQ user",
		Note: fmt.Sprintf("this is its new user %s (the old user works until discard)", newUser(cs))}
	switch p.Format {
	case "env":
		c.Keys = []string{rabbitmq.KeyUsername, rabbitmq.KeyPassword}
		c.Fields = func(v []string) []string { return []string{"RABBITMQ_USERNAME", v[0], "RABBITMQ_PASSWORD", v[1]} }
	case "url":
		t := cs.Spec.RabbitMQ.TransportURL
		if t == nil {
			return registry.Credential{}, fmt.Errorf("credentialset %q renders no transport_url (spec.rabbitmq.transportURL is not set): use --format plain or env, or set transportURL", cs.Name)
		}
		c.Keys, c.Render = []string{t.SecretKey()}, registry.PlainLine
	default:
		c.Keys, c.Render = []string{rabbitmq.KeyPassword}, registry.PlainLine
	}
	return c, nil
}
