package rabbitmq

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// Adoption (spec.rabbitmq.adopt) makes the user services log in as before
// rekey generation 1, so that the first rotation retires it instead of
// leaving it beside rekey's users forever. rekey did not make that user and
// others may use it, so adoption changes as little as it can: the user
// keeps its password hash, its tags and its permissions, and only gains
// this set's mark. The mark is what every later change and the final
// deletion check, as for the users rekey creates.
//
// A user's password is the one proof a CredentialSet can give that its
// author may retire that user: rekey adopts only after the password from
// the set's own namespace logs in as it. Several sets may adopt the same
// user (several services shared it before rekey); each proves the password
// and adds its own mark, and the controller deletes the user only once the
// consumers of every marked set have moved: each set removes its own mark
// when its own consumers moved, and the last one deletes the user.

// Adopted is the user spec.rabbitmq.adopt names, "" without one.
func (b *Backend) Adopted() string { return b.adopt }

// isAdopted: name is not one of this set's generations, so as this set's
// current user it is one rekey did not make by the pattern (admission and
// New keep the adopted name out of it): its tags and grants are left as
// they are, and the set's deletion removes only its mark.
func (b *Backend) isAdopted(name string) bool {
	_, gen := generationOf(b.base, name)
	return !gen
}

// ProveAdoption checks, before anything is recorded or changed, that the
// adopted user exists and that password logs in as it. The controller calls
// it while the set provisions, so that a wrong password never reaches the
// source Secret.
func (b *Backend) ProveAdoption(ctx context.Context, password string) (err error) {
	defer func() { err = b.redact(err, engine.Secrets{KeyPassword: password}) }()
	if b.adopt == "" {
		return nil
	}
	return b.prove(ctx, b.adopt, password)
}

func (b *Backend) prove(ctx context.Context, name, password string) error {
	if name == b.adminUser {
		return b.adminRefusal(name)
	}
	if password == "" {
		return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf(
			"the Secret named in spec.rabbitmq.adopt.passwordSecretRef holds an empty password for user %s, so nothing was adopted or changed: put the password the user's services log in with under that key", name)}
	}
	exists, _, _, err := b.lookup(ctx, name)
	if err != nil {
		return err
	}
	if !exists {
		return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf(
			"user %s named in spec.rabbitmq.adopt.user does not exist on %s, so nothing was adopted or changed: name the user your services log in as today, or remove spec.rabbitmq.adopt to start with a new user %s",
			name, b.endpoint, UserName(b.base, 1))}
	}
	ok, err := b.authenticates(ctx, name, password)
	if err != nil {
		return err
	}
	if !ok {
		return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: fmt.Sprintf(
			"the password in the Secret named in spec.rabbitmq.adopt.passwordSecretRef does not log in as user %s on %s, so rekey did not adopt the user and changed nothing: put the password the user's services log in with today under that key (rekey adopts only a user whose password it is given, as proof that the user is yours to retire)",
			name, b.endpoint)}
	}
	return nil
}

// claimAdopted marks the user the spec adopts as this set's (Provision):
// it must exist and accept password, and keeps everything it had.
func (b *Backend) claimAdopted(ctx context.Context, name, password string) error {
	if err := b.prove(ctx, name, password); err != nil {
		return err
	}
	return b.retag(ctx, "provision", name, func(tags rabbithole.UserTags) rabbithole.UserTags {
		if b.owned(tags) {
			return nil
		}
		return append(slices.Clone(tags), b.ownerTag())
	})
}

// resetAdopted makes an adopted current user accept password again (a
// rolled-back first rotation) without touching its tags or permissions,
// which may be what other services need. A user that is gone is created
// anew from the spec, as a generation would be: the source Secret's
// password is then the one that works.
func (b *Backend) resetAdopted(ctx context.Context, name, password string) error {
	if name == b.adminUser {
		return b.adminRefusal(name)
	}
	exists, err := b.mustOwn(ctx, name, "reset")
	if err != nil {
		return err
	}
	if !exists {
		return b.ensureUser(ctx, "reset", name, password)
	}
	ok, err := b.authenticates(ctx, name, password)
	if err != nil || ok {
		return err
	}
	c := b.api(ctx)
	u, err := c.GetUser(name)
	if err != nil {
		return b.apiError(ctx, "read user "+name, err)
	}
	err = drain(c.PutUser(name, rabbithole.UserSettings{Password: password, Tags: u.Tags}))
	failpoint.Hit("reset/rabbitmq-user-put")
	return b.apiError(ctx, "reset the password of user "+name, err)
}

// release removes this set's mark from a user, and nothing else (its
// password, other tags and permissions stay): when the set is deleted and
// leaves the user to whoever uses it (an adopted user existed before rekey
// and services may still use it; Release leaves the current generation to
// its consumers), and when retiring a user other sets still hold (their
// consumers may still log in as it; the last of them deletes it once its
// own consumers moved: a finalizer per user, one per set).
func (b *Backend) release(ctx context.Context, step, name string) error {
	if name == b.adminUser {
		return nil
	}
	return b.retag(ctx, step, name, func(tags rabbithole.UserTags) rabbithole.UserTags {
		if !b.owned(tags) {
			return nil
		}
		return slices.DeleteFunc(slices.Clone(tags), func(t string) bool { return t == b.ownerTag() })
	})
}

// retag rewrites a user's tags and nothing else: the PUT carries the
// password hash the broker holds, so the password is neither sent nor
// changed. mutate returns nil for "no change". A user that is gone needs
// no tags. The management API has no compare-and-set: a change someone
// makes between the read and the write is overwritten, a window of one
// request that only the broker's admins can use.
func (b *Backend) retag(ctx context.Context, step, name string, mutate func(rabbithole.UserTags) rabbithole.UserTags) error {
	c := b.api(ctx)
	u, err := c.GetUser(name)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return b.apiError(ctx, "read user "+name, err)
	}
	tags := mutate(u.Tags)
	if tags == nil {
		return nil
	}
	if u.PasswordHash == "" {
		return &engine.Refusal{Reason: string(reason.BackendError), Message: fmt.Sprintf(
			"the management API of %s did not show the password hash of user %s, so its tags were not changed (that would change its password): give the admin user the administrator tag", b.endpoint, name)}
	}
	err = drain(c.PutUser(name, rabbithole.UserSettings{PasswordHash: u.PasswordHash, HashingAlgorithm: u.HashingAlgorithm, Tags: tags}))
	if err != nil {
		return b.apiError(ctx, "mark user "+name, err)
	}
	failpoint.Hit(step + "/rabbitmq-user-marked")
	return nil
}

// coOwners lists the marks of other CredentialSets the user carries:
// sets that adopted the same user. A mark of a set that no longer exists
// (LiveOwner says so) does not count: nobody will ever remove it.
func (b *Backend) coOwners(tags rabbithole.UserTags) []string {
	var out []string
	for _, t := range tags {
		uid, ok := strings.CutPrefix(t, OwnerTagPrefix)
		if !ok || uid == b.owner || b.LiveOwner != nil && !b.LiveOwner(uid) {
			continue
		}
		out = append(out, uid)
	}
	return out
}
