package rabbitmq

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// OwnerTagPrefix begins the tag that marks a user as made by rekey for one
// CredentialSet: rekey-owner-<set UID>. A RabbitMQ user carries nothing but
// its password hash and its tags, and the broker treats tags it does not
// know as plain labels (no access follows from them), so a tag is the one
// place a mark can live on the broker itself, next to the user, where
// every tool shows it (rabbitmqctl list_users, the management UI).
const OwnerTagPrefix = "rekey-owner-"

// ownerPattern bounds the owner marker: a Kubernetes UID is a UUID, and
// anything that goes into a tag must not hold the comma the management
// API separates tags with.
var (
	ownerPattern = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9]{0,127}$`)
	shellSafe    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

func checkOwner(owner string) error {
	if !ownerPattern.MatchString(owner) {
		return fmt.Errorf("rabbitmq: owner marker %q: want the CredentialSet's UID (letters, digits and '-')", owner)
	}
	return nil
}

// checkTags keeps the spec from handing out rekey's marks: a user listed
// with another set's owner tag would look like that set's.
func checkTags(tags []string) error {
	for _, t := range tags {
		if strings.HasPrefix(t, OwnerTagPrefix) {
			return fmt.Errorf("rabbitmq.user.tags: %q begins with %s, which is reserved for rekey's marks of ownership: remove it", t, OwnerTagPrefix)
		}
		if t == "" || strings.ContainsAny(t, ",\x00") {
			return fmt.Errorf("rabbitmq.user.tags: %q is not a tag: use lower case letters, '_' and '-'", t)
		}
	}
	return nil
}

// OwnerTag is the tag rekey gives every user it creates for the set whose
// UID is owner.
func OwnerTag(owner string) string { return OwnerTagPrefix + owner }

func (b *Backend) ownerTag() string { return OwnerTag(b.owner) }

// owned: the user carries this set's mark.
func (b *Backend) owned(tags rabbithole.UserTags) bool {
	return slices.Contains(tags, b.ownerTag())
}

// userTags is what ensureUser writes: the spec's tags and the mark.
func (b *Backend) userTags() rabbithole.UserTags {
	return append(append(rabbithole.UserTags{}, b.tags...), b.ownerTag())
}

// lookup reads a user: exists is false when the broker has none of that
// name, owned whether it carries this set's mark.
func (b *Backend) lookup(ctx context.Context, name string) (exists, owned bool, tags rabbithole.UserTags, err error) {
	u, err := b.api(ctx).GetUser(name)
	if isNotFound(err) {
		return false, false, nil, nil
	}
	if err != nil {
		return false, false, nil, b.apiError(ctx, "read user "+name, err)
	}
	return true, b.owned(u.Tags), u.Tags, nil
}

// mustOwn refuses a user that exists without this set's mark; a user that
// does not exist is fine (rekey is about to create it, or deleted it
// already).
func (b *Backend) mustOwn(ctx context.Context, name, doing string) (exists bool, err error) {
	exists, owned, tags, err := b.lookup(ctx, name)
	if err != nil || !exists || owned {
		return exists, err
	}
	return true, b.notOwned(name, doing, tags)
}

// notOwned names the user, whose it looks like, and the two ways out. A
// user without any rekey mark may have been made by a rekey release that
// did not mark users yet: it is never adopted by itself, since a user of
// the same name made by someone else would be taken over; whoever runs the
// broker hands it over by tagging it.
func (b *Backend) notOwned(name, doing string, tags rabbithole.UserTags) error {
	whose := "it carries no rekey-owner tag: someone else created it, or a rekey release that did not mark its users yet"
	for _, t := range tags {
		if strings.HasPrefix(t, OwnerTagPrefix) {
			whose = fmt.Sprintf("it carries the tag %s: another CredentialSet (UID %s) owns it", t, strings.TrimPrefix(t, OwnerTagPrefix))
			break
		}
	}
	// The suggested command lists the user's other tags, which set_user_tags
	// would drop otherwise; tags someone else chose are quoted only when
	// nothing in them means anything to a shell.
	keep := make([]string, 0, len(tags)+1)
	for _, t := range tags {
		switch {
		case t == "" || strings.HasPrefix(t, OwnerTagPrefix):
		case !shellSafe.MatchString(t):
			keep = []string{"<its other tags>"}
		default:
			if len(keep) == 0 || keep[0] != "<its other tags>" {
				keep = append(keep, t)
			}
		}
	}
	keep = append(keep, b.ownerTag())
	return &engine.Refusal{Reason: string(reason.NotOwned), Message: fmt.Sprintf(
		"user %s on %s was not created by rekey for this CredentialSet (%s), so rekey did not %s it; nothing was changed: "+
			"if nobody uses it, delete it; if it is this set's, hand it over by tagging it %s (rabbitmqctl set_user_tags %s %s); or give rabbitmq.user.base a name of its own",
		name, b.endpoint, whose, doing, b.ownerTag(), name, strings.Join(keep, " "))}
}
