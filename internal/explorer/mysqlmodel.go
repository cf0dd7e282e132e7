package explorer

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/reason"
)

// modelBackend is the engine.Backend the explorer's sets use: the MySQL
// backend's decisions (internal/backend/mysql: backend.go, retire.go,
// pending_repair.go, login.go) carried out on the World's instances
// instead of real servers, one instance after another.
type modelBackend struct {
	w  *World
	cs *v1.CredentialSet
	// fence is the set's (registry.Kube.Fence), asked where the MySQL
	// backend asks it before a write it decided outside the engine's
	// sequence: a repair.
	fence func(context.Context) error
	// without are keys the spec lists that an in-flight rotation leaves
	// out (engine.Narrower).
	without []string
}

var _ engine.Backend = (*modelBackend)(nil)
var _ engine.Repairer = (*modelBackend)(nil)
var _ engine.DiscardGate = (*modelBackend)(nil)
var _ engine.Releaser = (*modelBackend)(nil)
var _ engine.Deprovisioner = (*modelBackend)(nil)
var _ engine.IdleRepairer = (*modelBackend)(nil)
var _ engine.Narrower = (*modelBackend)(nil)

// Annotation selects the model backend for a set: mysqlWorld (this
// one), or RabbitWorld (rabbitmodel.go).
const (
	Annotation = "explorer.rekey.io/world"
	mysqlWorld = "model"
)

// active is the World the step being run acts on; the explorer runs one
// step at a time.
var active *World

func init() {
	registry.Register(registry.Entry{
		Kind:    "explorer-mysql",
		Field:   "the " + Annotation + " annotation",
		Selects: func(cs *v1.CredentialSet) bool { return cs.Annotations[Annotation] == mysqlWorld },
		Build: func(_ context.Context, cs *v1.CredentialSet, k registry.Kube, _ registry.Options) (*registry.Plan, error) {
			w := active
			adopt := engine.Secrets{}
			for _, k := range keysOf(cs, w.FixedAdmin) {
				adopt[k] = initial(k)
			}
			return &registry.Plan{Backend: &modelBackend{w: w, cs: cs, fence: k.Fence}, NoInstances: len(listedOf(cs, w.present())) == 0, Adopt: adopt}, nil
		},
		LockKeys: func(cs *v1.CredentialSet) []string { return []string{"explorer:" + cs.Annotations[Annotation]} },
	})
}

func (b *modelBackend) Keys() []string {
	return slices.DeleteFunc(keysOf(b.cs, b.w.FixedAdmin), func(k string) bool { return slices.Contains(b.without, k) })
}

func (b *modelBackend) Traits() engine.Traits { return engine.Traits{Overlap: true, AddsAtRest: true} }

// NewSecrets is deterministic, so that equal histories give equal states:
// each rotation's passwords are named after it.
func (b *modelBackend) NewSecrets(gen int64) (engine.Secrets, error) {
	id := b.cs.Status.RotationID
	if id == "" {
		id = fmt.Sprintf("g%d", gen)
	}
	out := engine.Secrets{}
	for _, k := range b.Keys() {
		out[k] = strings.TrimSuffix(k, "_PASSWORD") + "-" + id
	}
	return out, nil
}

func (b *modelBackend) Render(s engine.Secrets) (map[string][]byte, error) {
	out := map[string][]byte{}
	for k, v := range s {
		out[k] = []byte(v)
	}
	return out, nil
}

func (b *modelBackend) Version(context.Context, engine.Secrets) (string, error) {
	return "9.7.4", nil
}

// errAdminRefused: the admin logs in with none of the passwords tried.
type errAdminRefused struct{ inst string }

func (e *errAdminRefused) Error() string {
	return fmt.Sprintf("instance %s refuses the admin's passwords", e.inst)
}

// each runs fn on every present instance after an admin login with one
// of passwords; an instance failing does not stop the others (the MySQL
// backend's errgroup), and the first error is returned. A failpoint after
// each instance lets the explorer crash between instances.
func (b *modelBackend) each(step string, passwords []string, fn func(in *Instance) error) error {
	insts := b.insts()
	if len(insts) == 0 {
		return &engine.Refusal{Reason: string(reason.RotateRefused), Message: "no instances: scale the cluster up"}
	}
	var first error
	for _, in := range insts {
		if in.Down {
			if first == nil {
				first = &engine.UnreachableError{Instance: in.Name, Err: errDown}
			}
			continue
		}
		err := b.admin(in, passwords)
		if err == nil {
			err = fn(in)
		}
		if err == nil {
			failpoint.Hit(step)
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func (b *modelBackend) admin(in *Instance, passwords []string) error {
	if b.w.FixedAdmin {
		passwords = []string{initial(b.w.adminAccount())}
	}
	a := in.acct(b.w.adminAccount())
	for _, pw := range passwords {
		if a.Accepts(pw) {
			return nil
		}
	}
	return &errAdminRefused{in.Name}
}

func (b *modelBackend) Provision(_ context.Context, cur engine.Secrets) (engine.Provisioned, error) {
	err := b.each("model/provision", []string{cur[AdminKey]}, func(in *Instance) error {
		var refused []string
		for _, k := range b.Keys() {
			a := in.acct(k)
			if !a.Exists {
				a.make(cur[k])
				a.mark(b.gen(), false)
				in.set(k, a)
			} else if !a.Accepts(cur[k]) {
				refused = append(refused, k)
			}
		}
		if len(refused) > 0 {
			return &engine.Refusal{Reason: string(reason.ProvisionFailed), Message: in.Name + " refuses " + strings.Join(refused, ", ")}
		}
		for _, k := range b.Keys() {
			if a := in.acct(k); !a.Dual() && a.Gen == 0 {
				a.mark(b.gen(), false) // adopted users marked as provisioned
				in.set(k, a)
			}
		}
		return nil
	})
	return engine.Provisioned{Secrets: cur}, err
}

func (b *modelBackend) Precheck(_ context.Context, cur engine.Secrets) error {
	var found []string
	err := b.each("model/precheck", []string{cur[AdminKey]}, func(in *Instance) error {
		for _, k := range b.Keys() {
			if in.acct(k).Dual() {
				found = append(found, k+" on "+in.Name)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := b.health(false); err != nil {
		return err
	}
	if len(found) > 0 {
		return &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: strings.Join(found, ", ") +
			" already has a secondary password; reset it (kubectl rekey recover does this), then rotate again"}
	}
	return nil
}

// Apply: create a missing user accepting cur, then RETAIN pending for
// every user without a secondary (asked first, never twice).
func (b *modelBackend) Apply(_ context.Context, cur, pending engine.Secrets, gen int64) (engine.Secrets, error) {
	return pending, b.each("model/applied", []string{cur[AdminKey], pending[AdminKey]}, func(in *Instance) error {
		for _, k := range b.Keys() {
			a := in.acct(k)
			if !a.Exists {
				a.make(cur[k])
				a.mark(b.gen(), false)
			}
			if a.stale(b.gen()) {
				a.resetToCur(cur[k], b.gen())
			}
			if !a.Dual() {
				a.identifiedBy(pending[k], true)
				a.mark(gen, true)
			}
			in.set(k, a)
		}
		return nil
	})
}

// Retire is retire.go's planRetire on each instance; its refusals say
// what retire.go's say (the explorer reads which command they name).
func (b *modelBackend) Retire(ctx context.Context, cur, pending engine.Secrets) error {
	if err := b.CheckDiscardHealth(ctx, cur, pending); err != nil {
		return err
	}
	return b.each("model/retired", []string{pending[AdminKey], cur[AdminKey]}, func(in *Instance) error {
		b.resetStale(in, cur)
		for _, k := range b.Keys() {
			if !in.acct(k).Exists && !b.acceptedElsewhere(in, k, pending[k]) {
				return &engine.Refusal{Reason: string(reason.DiscardRefused), Message: fmt.Sprintf(
					"user %s does not exist on %s and no other instance accepts the new password; nothing was created or discarded there. The discard began, so the rotation can only complete (abort and recover are refused): create the user there by hand with the new password", k, in.Name)}
			}
		}
		var refused, create, retain, discard []string
		for _, k := range b.Keys() {
			a := in.acct(k)
			switch {
			case !a.Exists:
				create = append(create, k)
			case a.Accepts(pending[k]) && a.Dual():
				discard = append(discard, k)
			case a.Accepts(pending[k]):
			case a.Dual():
				refused = append(refused, k)
			case a.Accepts(cur[k]):
				retain, discard = append(retain, k), append(discard, k)
			default:
				refused = append(refused, k)
			}
		}
		if len(refused) > 0 {
			return &engine.Refusal{Reason: string(reason.PendingRejected), Message: fmt.Sprintf(
				"%s refuses the new password the source Secret holds for %s, so discarding the old one could lock its consumers out; nothing was discarded there. The discard began, so the rotation can only complete (abort and recover are refused): set each of these users there to the new password by hand and the discard finishes by itself",
				in.Name, strings.Join(refused, ", "))}
		}
		for _, k := range create {
			a := Account{}
			a.make(pending[k])
			a.mark(b.target(), false)
			in.set(k, a)
		}
		for _, k := range retain {
			a := in.acct(k)
			a.identifiedBy(pending[k], true)
			a.mark(b.target(), true)
			in.set(k, a)
		}
		if len(discard) > 0 {
			b.duringSwitch("discarded on " + in.Name)
		}
		for _, k := range discard {
			a := in.acct(k)
			a.discard()
			a.mark(b.target(), false)
			in.set(k, a)
		}
		return nil
	})
}

func (b *modelBackend) acceptedElsewhere(inst *Instance, key, pw string) bool {
	for _, in := range b.insts() {
		if in.Name != inst.Name && !in.Down && in.acct(key).Accepts(pw) {
			return true
		}
	}
	return false
}

// Reset: IDENTIFIED BY cur keeps the secondary, so DISCARD follows.
func (b *modelBackend) Reset(_ context.Context, cur engine.Secrets) error {
	b.noteUnreset()
	return b.each("model/reset", []string{cur[AdminKey]}, func(in *Instance) error {
		for _, k := range b.Keys() {
			a := in.acct(k)
			if !a.Exists {
				a.make(cur[k])
			}
			a.identifiedBy(cur[k], false)
			a.discard()
			a.mark(b.gen(), false)
			a.Hand, a.Fixed = false, false // reset to what the source Secret holds
			in.set(k, a)
		}
		return nil
	})
}

// Verify logs in as every user on every instance (no admin needed).
func (b *modelBackend) Verify(_ context.Context, s engine.Secrets) error {
	var refused []string
	var other error
	for _, in := range b.insts() {
		if in.Down {
			if other == nil {
				other = &engine.UnreachableError{Instance: in.Name, Err: errDown}
			}
			continue
		}
		for _, k := range b.Keys() {
			if !in.acct(k).Accepts(s[k]) {
				refused = append(refused, k+" on "+in.Name)
			}
		}
	}
	if len(refused) == 0 {
		return other // login.go's verifyVerdict: refusals first
	}
	if len(refused) > 0 {
		return &engine.Refusal{Reason: string(reason.PendingRejected), Message: "MySQL refuses the password the source Secret holds for " +
			strings.Join(refused, ", ") + ", so the distribution Secrets were not changed: the source Secret was edited by hand; run kubectl rekey recover"}
	}
	return nil
}

// CheckDiscardHealth: the health gate logs in as the admin on every
// instance, then judges the roles (switchover.go).
func (b *modelBackend) CheckDiscardHealth(_ context.Context, cur, pending engine.Secrets) error {
	if err := b.each("model/discard-health", []string{pending[AdminKey], cur[AdminKey]}, func(*Instance) error { return nil }); err != nil {
		return err
	}
	return b.health(true)
}

// noteUnreset notes, as a reset begins, the pending secrets it is about
// to make invalid (and the controller then drops from the source Secret)
// that an instance it does not reach accepts: one out of the spec, or
// scaled in, while the rollback ran. Listed again, or back, it holds a
// secret no Secret holds; its marks cannot tell that from a status
// restored from an older backup (both record a generation the status
// does not), so rekey reports it (DualPasswordExists, naming recover)
// rather than reset it by itself, and "nothing lost" excuses it
// (recoverable).
func (b *modelBackend) noteUnreset() {
	if b.w.Source == nil {
		return
	}
	reached := b.insts()
	for _, in := range b.w.Instances {
		if slices.Contains(reached, in) {
			continue
		}
		for _, k := range b.Keys() {
			pw := string(b.w.Source.Data[engine.PendingKey(k)])
			if e := in.Name + "=" + pw; pw != "" && in.acct(k).Accepts(pw) && !slices.Contains(b.w.Unreset, e) {
				b.w.Unreset = append(b.w.Unreset, e)
			}
		}
	}
	slices.Sort(b.w.Unreset)
}
