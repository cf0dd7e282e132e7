package explorer

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// The RabbitMQ world (option RabbitMQ): one broker, whose users are the
// World's one instance's accounts, keyed by user name (a password each,
// Marked when it carries the set's mark). The set rotates a user per
// generation, <base>-g<N>: a rotation creates the next generation's user
// beside the current one, consumers move to it, and the discard deletes the
// current one. The decisions are the RabbitMQ backend's
// (internal/backend/rabbitmq rotation.go, users.go, verify.go), carried
// out on that model; each is proven on a real rabbitmq-server by that
// package's and test/e2e's RabbitMQ tests (TestRabbitMQRotation,
// TestRabbitMQCrashSafety, TestRabbitMQDeletion, TestRabbitMQOwnership).
// An adopted user (option Adopt) is rabbitadopt.go's; two sets on one
// broker (option TwoSets), each with a base of its own, rabbittwosets.go's.
const (
	// RabbitWorld is the model annotation's value that selects it.
	RabbitWorld = "rabbitmq"
	// The source Secret's keys, as the RabbitMQ backend's.
	rabbitUserKey     = "username"
	rabbitPasswordKey = "password"
	// broker is the one instance; rabbitBase the user's base name.
	broker     = "broker"
	rabbitBase = "app"
)

// rabbit: w's set is the RabbitMQ model's.
func (w *World) rabbit() bool { return w.Set.Annotations[Annotation] == RabbitWorld }

// rabbitGeneration is N of a user named app-g<N> (the first set's base).
func rabbitGeneration(user string) (int64, bool) { return rabbitGenerationOf(rabbitBase, user) }

// rabbitGenerationOf is N of a user named <base>-g<N>, as the backend's
// generationOf: exactly what UserName makes, no leading zeros.
func rabbitGenerationOf(base, user string) (int64, bool) {
	rest, ok := strings.CutPrefix(user, base+"-g")
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, ok && err == nil && n > 0 && strconv.FormatInt(n, 10) == rest
}

// rabbitBaseOf is cs's spec.rabbitmq.user.base: app, or the annotation's
// (the second set's, rabbittwosets.go).
func rabbitBaseOf(cs *v1.CredentialSet) string {
	if base := cs.Annotations[RabbitBaseAnnotation]; base != "" {
		return base
	}
	return rabbitBase
}

type rabbitBackend struct {
	w  *World
	cs *v1.CredentialSet
}

var _ engine.Backend = (*rabbitBackend)(nil)
var _ engine.Releaser = (*rabbitBackend)(nil)
var _ engine.Deprovisioner = (*rabbitBackend)(nil)

func init() {
	registerWorld(RabbitWorld, func(cs *v1.CredentialSet) engine.Backend { return &rabbitBackend{w: active, cs: cs} })
}

// registerWorld registers the model backend of a world a set selects by
// the model annotation's value (the MySQL model registers its own: it
// builds more than a backend).
func registerWorld(world string, build func(cs *v1.CredentialSet) engine.Backend) {
	registerWorldWith(world, func(_ context.Context, cs *v1.CredentialSet, _ registry.Kube) (engine.Backend, error) {
		return build(cs), nil
	})
}

// registerWorldWith is registerWorld for a model whose building does
// something first (with the set's fence), and may fail.
func registerWorldWith(world string, build func(ctx context.Context, cs *v1.CredentialSet, k registry.Kube) (engine.Backend, error)) {
	registry.Register(registry.Entry{
		Kind:    "explorer-" + world,
		Field:   "the " + Annotation + " annotation (" + world + ")",
		Selects: func(cs *v1.CredentialSet) bool { return cs.Annotations[Annotation] == world },
		Build: func(ctx context.Context, cs *v1.CredentialSet, k registry.Kube, _ registry.Options) (*registry.Plan, error) {
			b, err := build(ctx, cs, k)
			if err != nil {
				return nil, err
			}
			p := &registry.Plan{Backend: b}
			if a, ok := b.(adopter); ok {
				if p.Adopt, err = a.adoption(); err != nil {
					return nil, err
				}
			}
			return p, nil
		},
		LockKeys: func(*v1.CredentialSet) []string { return []string{"explorer:" + world} },
	})
}

func (b *rabbitBackend) Keys() []string { return []string{rabbitUserKey, rabbitPasswordKey} }

func (b *rabbitBackend) Traits() engine.Traits { return engine.Traits{Overlap: true} }

// NewSecrets: the generation's user; a password named after the rotation
// (deterministic, so that equal histories give equal states).
func (b *rabbitBackend) NewSecrets(gen int64) (engine.Secrets, error) {
	id := b.cs.Status.RotationID
	if id == "" {
		id = fmt.Sprintf("g%d", gen)
	}
	base, pw := rabbitBaseOf(b.cs), "pw-"+id
	if base != rabbitBase {
		pw = "pw-" + base + "-" + id
	}
	return engine.Secrets{rabbitUserKey: fmt.Sprintf("%s-g%d", base, gen), rabbitPasswordKey: pw}, nil
}

func (b *rabbitBackend) Render(s engine.Secrets) (map[string][]byte, error) {
	out := map[string][]byte{}
	for k, v := range s {
		out[k] = []byte(v)
	}
	return out, nil
}

func (b *rabbitBackend) Version(context.Context, engine.Secrets) (string, error) { return "4.1.4", nil }

// broker is the one instance; nil (unreachable) while it does not answer.
func (b *rabbitBackend) broker() (*Instance, error) {
	in := b.w.instance(broker)
	if in == nil || !in.Present || in.Down {
		return nil, &engine.UnreachableError{Instance: broker, Err: errDown}
	}
	return in, nil
}

// ensure is ensureUser: a user without the set's mark is refused (NotOwned);
// otherwise it is made, or its password set, marked.
func (b *rabbitBackend) ensure(in *Instance, step, user, pw string) error {
	if a := in.acct(user); a.Exists && !a.Marked {
		return b.notOwned(user)
	}
	in.set(user, Account{Exists: true, Primary: pw, Marked: true})
	failpoint.Hit(step + "/rabbitmq-user-put")
	return nil
}

func (b *rabbitBackend) notOwned(user string) error {
	return &engine.Refusal{Reason: string(reason.NotOwned), Message: fmt.Sprintf("user %s on %s does not carry this set's mark, so rekey does not change it", user, broker)}
}

// generations are the broker's users that are the set's: marked
// <base>-g<N>. The model's mark is one flag: a user named after a base
// carries the mark of the set with that base, if any, since two sets on
// one broker never share a base (rabbittwosets.go).
func (b *rabbitBackend) generations(in *Instance) []string {
	var names []string
	for name, a := range in.Users {
		if _, ok := rabbitGenerationOf(rabbitBaseOf(b.cs), name); ok && a.Exists && a.Marked {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// removeGenerations deletes every generation but keep.
func (b *rabbitBackend) removeGenerations(in *Instance, step string, keep ...string) {
	for _, n := range b.generations(in) {
		if !slices.Contains(keep, n) {
			delete(in.Users, n)
			failpoint.Hit(step + "/rabbitmq-user-deleted")
		}
	}
}

// Provision: a user that exists must carry the mark and accept cur.
func (b *rabbitBackend) Provision(_ context.Context, cur engine.Secrets) (engine.Provisioned, error) {
	in, err := b.broker()
	if err != nil {
		return engine.Provisioned{}, err
	}
	user, pw := cur[rabbitUserKey], cur[rabbitPasswordKey]
	if adopt := b.adopted(); adopt != "" && user == adopt {
		return b.provisionAdopted(in, user, pw)
	}
	if a := in.acct(user); a.Exists && !a.Marked {
		return engine.Provisioned{}, b.notOwned(user)
	} else if a.Exists && !a.Accepts(pw) {
		return engine.Provisioned{}, &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: "user " + user + " already exists and does not accept the password rekey holds for it"}
	}
	if err := b.ensure(in, "provision", user, pw); err != nil {
		return engine.Provisioned{}, err
	}
	gen, _ := rabbitGenerationOf(rabbitBaseOf(b.cs), user)
	return engine.Provisioned{Secrets: cur, Generation: gen}, nil
}

// Precheck: the current user exists, carries the mark and logs in.
func (b *rabbitBackend) Precheck(_ context.Context, cur engine.Secrets) error {
	in, err := b.broker()
	if err != nil {
		return err
	}
	user := cur[rabbitUserKey]
	a := in.acct(user)
	if a.Exists && !a.Marked {
		return b.notOwned(user)
	}
	for _, n := range b.generations(in) {
		if n != user {
			return &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: "user " + n + " already has a login on " + broker + " beside the current user " + user + ": a generation of this set that the status does not account for (was the status or the source Secret restored from a backup?), which consumers may log in as, so nothing was changed: reset the broker to the source Secret (kubectl rekey recover does this, once the consumers run the current user), then rotate again"}
		}
	}
	switch {
	case !a.Exists:
		return &engine.Refusal{Reason: string(reason.RotateRefused), Message: "user " + user + ", the current user in the source Secret, does not exist, so the rotation did not start: recreate it with the source Secret's password (kubectl rekey recover resets the broker to the source Secret), then rotate again"}
	case !a.Accepts(cur[rabbitPasswordKey]):
		return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: "user " + user + " does not accept the password the source Secret holds for it, so the rotation did not start: once no consumer depends on the broker's password, reset the user to the source Secret's (kubectl rekey recover), then rotate again"}
	}
	return nil
}

// Apply makes the pending user beside the current one, then sweeps the
// generations of interrupted rotations.
func (b *rabbitBackend) Apply(_ context.Context, cur, pending engine.Secrets, _ int64) (engine.Secrets, error) {
	in, err := b.broker()
	if err != nil {
		return nil, err
	}
	user := pending[rabbitUserKey]
	if user == cur[rabbitUserKey] {
		return nil, b.sameUser(reason.RotateRefused, user)
	}
	if err := b.ensure(in, "rotate", user, pending[rabbitPasswordKey]); err != nil {
		return nil, err
	}
	b.removeGenerations(in, "rotate", cur[rabbitUserKey], user)
	return pending, nil
}

func (b *rabbitBackend) sameUser(r reason.Reason, user string) error {
	return &engine.Refusal{Reason: string(r), Message: "the pending user " + user + " is also the current user, so retiring one would delete the other: abort the rotation (kubectl rekey abort) and rotate again"}
}

// Retire deletes the current user once the pending one logs in.
func (b *rabbitBackend) Retire(_ context.Context, cur, pending engine.Secrets) error {
	in, err := b.broker()
	if err != nil {
		return err
	}
	user, old := pending[rabbitUserKey], cur[rabbitUserKey]
	if old == user {
		return b.sameUser(reason.DiscardRefused, user)
	}
	if !in.acct(user).Accepts(pending[rabbitPasswordKey]) {
		return &engine.Refusal{Reason: string(reason.PendingRejected), Message: "user " + user + " does not accept the pending password the source Secret holds, so " + old + " was not deleted (its consumers could be locked out). The discard began and can only complete: set " + user + "'s password on the broker back to the source Secret's " + engine.PendingKey(rabbitPasswordKey) + " (rabbitmqctl change_password), then rekey finishes it"}
	}
	a := in.acct(old)
	if !a.Exists {
		return nil // gone already: a Retire after a crash
	}
	if !a.Marked {
		return b.notOwned(old)
	}
	delete(in.Users, old)
	failpoint.Hit("discard/rabbitmq-user-deleted")
	return nil
}

// Reset repairs the current user first, then deletes every other
// generation.
func (b *rabbitBackend) Reset(_ context.Context, cur engine.Secrets) error {
	in, err := b.broker()
	if err != nil {
		return err
	}
	user, ensure := cur[rabbitUserKey], b.ensure
	if b.isAdopted(user) {
		ensure = b.resetAdopted // keeps the tags and grants it came with
	}
	if err := ensure(in, "reset", user, cur[rabbitPasswordKey]); err != nil {
		return err
	}
	b.removeGenerations(in, "reset", user)
	return nil
}

// Verify: the user logs in with the password s holds.
func (b *rabbitBackend) Verify(_ context.Context, s engine.Secrets) error {
	in, err := b.broker()
	if err != nil {
		return err
	}
	user := s[rabbitUserKey]
	if in.acct(user).Accepts(s[rabbitPasswordKey]) {
		return nil
	}
	return &engine.Refusal{Reason: string(reason.PendingRejected), Message: "user " + user + " does not accept the password the source Secret holds for it, so the distribution Secrets were not changed (consumers keep what works): the source Secret or the broker was changed outside rekey; run kubectl rekey recover"}
}

// Deprovision deletes every generation the set made, and hands an
// adopted current user back without the mark.
func (b *rabbitBackend) Deprovision(_ context.Context, cur engine.Secrets) error {
	in, err := b.broker()
	if err != nil {
		return err
	}
	b.removeGenerations(in, "deprovision")
	if user := cur[rabbitUserKey]; user != "" && b.isAdopted(user) {
		b.release(in, "deprovision/rabbitmq-user-marked", user)
	}
	return nil
}

// Release deletes every other generation, then takes the set's mark off
// the current user.
func (b *rabbitBackend) Release(_ context.Context, cur engine.Secrets) error {
	in, err := b.broker()
	if err != nil {
		return err
	}
	user := cur[rabbitUserKey]
	if user == "" {
		return &engine.Refusal{Reason: string(reason.KeyMismatch), Message: "the source Secret names no current user, so rekey cannot tell which user consumers log in as and deleted none: restore the source Secret, or choose deletionPolicy Retain and delete the set's users by hand"}
	}
	b.removeGenerations(in, "release", user)
	b.release(in, "release/rabbitmq-user-released", user)
	return nil
}

// release takes the set's mark off user, and nothing else.
func (b *rabbitBackend) release(in *Instance, step, user string) {
	if a := in.acct(user); a.Exists && a.Marked {
		a.Marked = false
		in.set(user, a)
		failpoint.Hit(step)
	}
}
