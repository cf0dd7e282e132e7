package rabbitmq

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// UserName names generation gen's user of base.
func UserName(base string, gen int64) string { return base + "-g" + strconv.FormatInt(gen, 10) }

// generationOf returns N when name is exactly what UserName(base, N) makes.
// Anything else (leading zeros, g0, another base that shares a prefix) is
// not a generation of this set, so it is never deleted as one.
func generationOf(base, name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, base+"-g")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || n < 1 || strconv.FormatInt(n, 10) != rest {
		return 0, false
	}
	return n, true
}

// IsGeneration: name is one of the users a set with this base makes
// (<base>-g<N>), which rekey deletes by that pattern.
func IsGeneration(base, name string) bool {
	_, ok := generationOf(base, name)
	return ok
}

// generations lists the broker's users that are generations of this set:
// named <base>-g<N> and carrying this set's mark. A user of that name
// without the mark (made by hand, by another tenant, by another set) is
// no generation of this set, so no sweep ever deletes it.
func (b *Backend) generations(ctx context.Context) ([]string, error) {
	users, err := b.api(ctx).ListUsers()
	if err != nil {
		return nil, b.apiError(ctx, "list users", err)
	}
	var out []string
	for _, u := range users {
		if _, ok := generationOf(b.base, u.Name); ok && u.Name != b.adminUser && b.owned(u.Tags) {
			out = append(out, u.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// removeGenerations deletes every generation of this set but keep.
func (b *Backend) removeGenerations(ctx context.Context, step string, keep ...string) error {
	names, err := b.generations(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
		if slices.Contains(keep, n) {
			continue
		}
		if err := b.deleteUser(ctx, n); err != nil {
			return err
		}
		failpoint.Hit(step + "/rabbitmq-user-deleted")
	}
	return nil
}

// deleteUser is idempotent: the broker answers 404 for a user deleted
// already, which rabbit-hole reports as success. RabbitMQ closes the
// user's open connections. Callers have checked the user carries this
// set's mark.
func (b *Backend) deleteUser(ctx context.Context, name string) error {
	if name == b.adminUser {
		return b.adminRefusal(name)
	}
	return b.apiError(ctx, "delete user "+name, drain(b.api(ctx).DeleteUser(name)))
}

// ensureUser makes name accept password and hold exactly the spec's
// tags (and this set's mark), vhost permissions and topic permissions. A
// user that exists without the mark is refused before anything changes.
// The management API cannot create a user only if it is absent, so a user
// someone creates between the check and the PUT would be overwritten;
// that window is one request long, and nobody but the broker's admins
// can create users.
func (b *Backend) ensureUser(ctx context.Context, step, name, password string) error {
	if name == b.adminUser {
		return b.adminRefusal(name)
	}
	if _, err := b.mustOwn(ctx, name, "change"); err != nil {
		return err
	}
	c := b.api(ctx)
	if err := drain(c.PutUser(name, rabbithole.UserSettings{Password: password, Tags: b.userTags()})); err != nil {
		return b.apiError(ctx, "create or update user "+name, err)
	}
	failpoint.Hit(step + "/rabbitmq-user-put")
	if err := b.syncPermissions(ctx, c, name); err != nil {
		return err
	}
	return b.syncTopicPermissions(ctx, c, name)
}

func (b *Backend) syncPermissions(ctx context.Context, c *rabbithole.Client, name string) error {
	have, err := c.ListPermissionsOf(name)
	if err != nil {
		return b.apiError(ctx, "read the permissions of "+name, err)
	}
	for _, h := range have {
		want := slices.IndexFunc(b.permissions, func(p v1.RabbitMQPermission) bool { return p.Vhost == h.Vhost })
		if want < 0 {
			if err := drain(c.ClearPermissionsIn(h.Vhost, name)); err != nil {
				return b.apiError(ctx, fmt.Sprintf("clear the permissions of %s on vhost %q", name, h.Vhost), err)
			}
		}
	}
	for _, p := range b.permissions {
		i := slices.IndexFunc(have, func(h rabbithole.PermissionInfo) bool { return h.Vhost == p.Vhost })
		if i >= 0 && have[i].Configure == p.Configure && have[i].Write == p.Write && have[i].Read == p.Read {
			continue
		}
		err := drain(c.UpdatePermissionsIn(p.Vhost, name, rabbithole.Permissions{Configure: p.Configure, Write: p.Write, Read: p.Read}))
		if err != nil {
			return b.grantError(ctx, c, name, p.Vhost, fmt.Sprintf("user.permissions[vhost %q]", p.Vhost), err)
		}
	}
	return nil
}

func (b *Backend) syncTopicPermissions(ctx context.Context, c *rabbithole.Client, name string) error {
	have, err := c.ListTopicPermissionsOf(name)
	if err != nil {
		return b.apiError(ctx, "read the topic permissions of "+name, err)
	}
	for _, h := range have {
		want := slices.IndexFunc(b.topics, func(t v1.RabbitMQTopicPermission) bool { return t.Vhost == h.Vhost && t.Exchange == h.Exchange })
		if want < 0 {
			if err := drain(c.DeleteTopicPermissionsIn(h.Vhost, name, h.Exchange)); err != nil {
				return b.apiError(ctx, fmt.Sprintf("delete the topic permission of %s on vhost %q, exchange %q", name, h.Vhost, h.Exchange), err)
			}
		}
	}
	for _, t := range b.topics {
		i := slices.IndexFunc(have, func(h rabbithole.TopicPermissionInfo) bool { return h.Vhost == t.Vhost && h.Exchange == t.Exchange })
		if i >= 0 && have[i].Write == t.Write && have[i].Read == t.Read {
			continue
		}
		err := drain(c.UpdateTopicPermissionsIn(t.Vhost, name, rabbithole.TopicPermissions{Exchange: t.Exchange, Write: t.Write, Read: t.Read}))
		if err != nil {
			return b.grantError(ctx, c, name, t.Vhost, fmt.Sprintf("user.topicPermissions[vhost %q, exchange %q]", t.Vhost, t.Exchange), err)
		}
	}
	return nil
}

// grantError explains a refused permission: the broker answers 400 both
// for a vhost that does not exist and for a pattern PCRE cannot compile,
// so the vhost is looked up. The broker's own reason is not repeated (see
// apiError).
func (b *Backend) grantError(ctx context.Context, c *rabbithole.Client, user, vhost, field string, err error) error {
	if !isBadRequest(err) {
		return b.apiError(ctx, "set "+field+" of "+user, err)
	}
	if _, verr := c.GetVhost(vhost); isNotFound(verr) {
		return &engine.Refusal{Reason: string(reason.BackendError), Message: fmt.Sprintf(
			"vhost %q named in %s does not exist on %s: create it (rabbitmqctl add_vhost) or remove it from the CredentialSet", vhost, field, b.endpoint)}
	}
	return &engine.Refusal{Reason: string(reason.InvalidSpec), Message: fmt.Sprintf(
		"the broker at %s refused %s for user %s (HTTP 400): fix its regular expressions (the broker compiles them as PCRE; rabbitmqctl set_permissions with the same patterns shows the broker's complaint) in the CredentialSet", b.endpoint, field, user)}
}

// adminRefusal keeps rekey from rewriting or deleting the very user it
// acts as, which would lock the operator out.
func (b *Backend) adminRefusal(name string) error {
	return &engine.Refusal{Reason: string(reason.InvalidSpec), Message: fmt.Sprintf(
		"user %s is the admin user rekey acts as, so it is never changed or deleted as a rotated user: give rabbitmq.user.base a name of its own", name)}
}
