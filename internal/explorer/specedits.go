package explorer

import (
	"fmt"
	"slices"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// Spec edits (Options.SpecEdits): the user edits the set's spec at any
// state, as kubectl edit or git does: the API server bumps
// metadata.generation and the next reconcile builds its plan from the new
// spec. The consumers are the real spec.consumers. The users and the
// instances are what spec.mysql.users and spec.mysql.instances.hosts
// would list; the model carries them in two annotations of the set
// instead, because a spec.mysql block would select the real MySQL backend
// (the registry takes the first backend whose block a set has) rather than
// the model. Annotations are part of the object the reconcile reads, so a
// reconcile from a stale read sees the spec as it was, as it would.
const (
	// UsersAnnotation lists the application users' keys the spec names
	// (the admin's is always listed when the set rotates it); absent, the
	// model's start: APP_PASSWORD.
	UsersAnnotation = "explorer.rekey.io/users"
	// InstancesAnnotation lists the instances the spec names; absent,
	// every instance of the world.
	InstancesAnnotation = "explorer.rekey.io/instances"
	// noUsers: the spec lists no application user (the admin alone).
	noUsers = "none"
)

// App2Key is a second application user the spec may list; no instance
// has it until rekey creates it.
const App2Key = "APP2_PASSWORD"

// keysOf are the source Secret keys cs's spec rotates.
func keysOf(cs *v1.CredentialSet, fixedAdmin bool) []string {
	switch cs.Annotations[Annotation] {
	case RabbitWorld:
		return []string{rabbitUserKey, rabbitPasswordKey}
	case PostgresWorld:
		return pgKeys(cs)
	case CephWorld, CephInPlaceWorld, CephAdminWorld:
		return cephKeys(cs) // client.app, and client.two when the spec lists it (cephentities.go)
	}
	apps := []string{AppKey}
	if v, ok := cs.Annotations[UsersAnnotation]; ok {
		apps = nil
		if v != noUsers {
			apps = strings.Split(v, ",")
		}
	}
	if fixedAdmin {
		return apps
	}
	return append([]string{AdminKey}, apps...)
}

// listedIn: cs's spec names the instance.
func listedIn(cs *v1.CredentialSet, name string) bool {
	v, ok := cs.Annotations[InstancesAnnotation]
	return !ok || slices.Contains(strings.Split(v, ","), name)
}

// listedOf are the instances of ins cs's spec names.
func listedOf(cs *v1.CredentialSet, ins []*Instance) []*Instance {
	return slices.DeleteFunc(slices.Clone(ins), func(in *Instance) bool { return !listedIn(cs, in.Name) })
}

// insts are the instances the backend built from the set's spec reaches:
// present in the cluster and named by the spec.
func (b *modelBackend) insts() []*Instance { return listedOf(b.cs, b.w.present()) }

// held are the instances rekey's promises cover now: present and named
// by the set's current spec. One the spec no longer names still serves
// whoever connects to it, but rekey no longer changes it: what it refuses
// is the user's doing (docs/explorer.md, "Spec edits").
func (w *World) held() []*Instance { return listedOf(w.Set, w.present()) }

// consumerListed: spec.consumers names the consumer's Deployment.
func (w *World) consumerListed() bool {
	return slices.ContainsFunc(w.Set.Spec.Consumers, func(c v1.ConsumerRef) bool { return c.Name == w.Web.Name })
}

// podHolds is what the consumer's pod holds that no lockout covers: the
// credentials of the users the spec lists (one listed again, from the
// set's next reconcile on: what the instances held of it while it was not
// the set's is not rekey's doing, as for an instance that returns), while
// its Deployment is one of the set's consumers and has been since the pod
// started (Orphan: it ran while unlisted, so rekey neither restarted it
// nor waited for it).
func podHolds(w *World) map[string]string {
	if w.Orphan {
		return nil
	}
	keys := w.keys()
	out := map[string]string{}
	for k, pw := range w.Pod.Creds {
		if slices.Contains(keys, k) && !slices.Contains(w.Relisted, k) {
			out[k] = pw
		}
	}
	return out
}

// specServed: every user the spec lists has a current secret in the
// source Secret and in the distribution Secret (a set that never serves a
// user its spec added is not back to Idle: the user waits for it).
func specServed(w *World) bool {
	for _, k := range w.keys() {
		if w.Source != nil && len(w.Source.Data[k]) == 0 {
			return false
		}
		if w.Dist != nil && len(w.Dist.Data[k]) == 0 {
			return false
		}
	}
	return true
}

// edit is a spec edit: the API server bumps metadata.generation.
func edit(change func(w *World) bool) func(*World) bool {
	return func(w *World) bool {
		if w.Gone || !change(w) {
			return false
		}
		w.Set.Generation++
		w.EditedAt = stageOf(w.Set.Status)
		return true
	}
}

// stageOf names the stage of a rotation st is at, for the tests' proof
// that edits were made at each.
func stageOf(st v1.CredentialSetStatus) string {
	switch {
	case st.ResetPending:
		return "resetPending"
	case st.DiscardStarted:
		return "mid-discard"
	case st.Phase == v1.PhaseDistributed:
		return "Distributed"
	case st.Phase == v1.PhaseRotating:
		return "Rotating"
	}
	return string(st.Phase)
}

// setUsers makes the spec list (add) or not list key.
func setUsers(key string, add bool) func(*World) bool {
	return edit(func(w *World) bool {
		apps := keysOf(w.Set, true)
		if slices.Contains(apps, key) == add {
			return false
		}
		w.Relisted = slices.DeleteFunc(w.Relisted, func(k string) bool { return k == key })
		if add {
			apps = append(apps, key)
			w.Relisted = append(w.Relisted, key)
		} else {
			apps = slices.DeleteFunc(apps, func(k string) bool { return k == key })
		}
		if len(apps) == 0 && w.FixedAdmin {
			return false // the spec must list a user (admission refuses)
		}
		v := strings.Join(apps, ",")
		if v == "" {
			v = noUsers
		}
		w.Set.Annotations[UsersAnnotation] = v
		return true
	})
}

// setInstance makes the spec list (add) or not list the instance. An
// instance listed again is held to the rules from the set's next
// reconcile on, like one that returned to the cluster (it held whatever
// it held while rekey did not reach it).
func setInstance(name string, add bool) func(*World) bool {
	return edit(func(w *World) bool {
		in := w.instance(name)
		if in == nil || listedIn(w.Set, name) == add {
			return false
		}
		var names []string
		for _, o := range w.Instances {
			if o.Name == name && add || o.Name != name && listedIn(w.Set, o.Name) {
				names = append(names, o.Name)
			}
		}
		if !slices.ContainsFunc(names, func(n string) bool { return w.instance(n).Present }) {
			// hosts needs one entry (admission refuses); and one that is
			// there: a cluster with none left is scaled to zero (a path of
			// its own), not a spec edit.
			return false
		}
		w.Set.Annotations[InstancesAnnotation] = strings.Join(names, ",")
		if add && in.Present {
			in.Returned = true
			in.Stranded = w.Source != nil && !w.FixedAdmin && !adminHeld(w, in.acct(AdminKey))
		}
		return true
	})
}

// setConsumer makes spec.consumers list (add) or not list the
// consumer's Deployment. Removed, its pod runs on with what it holds.
func setConsumer(add bool) func(*World) bool {
	return edit(func(w *World) bool {
		if w.WebGone || w.consumerListed() == add {
			return false
		}
		if add {
			w.Set.Spec.Consumers = []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: w.Web.Name}}
		} else {
			w.Set.Spec.Consumers, w.Orphan = nil, true
		}
		return true
	})
}

// specEditTransitions are the spec edits of o. A user added to the spec
// (a key the source Secret never held) only with o.UserAdds: a path not
// fixed yet (docs/explorer.md).
func specEditTransitions(o Options) []Transition {
	out := []Transition{
		{"user: removes APP from spec.mysql.users", setUsers(AppKey, false)},
		{"user: adds APP back to spec.mysql.users", setUsers(AppKey, true)},
		{"user: removes web from spec.consumers", setConsumer(false)},
		{"user: adds web back to spec.consumers", setConsumer(true)},
	}
	if o.UserAdds {
		out = append(out,
			Transition{"user: adds APP2 to spec.mysql.users (a new user)", setUsers(App2Key, true)},
			Transition{"user: removes APP2 from spec.mysql.users", setUsers(App2Key, false)})
	}
	for _, name := range o.Instances {
		out = append(out,
			Transition{fmt.Sprintf("user: removes %s from spec.mysql.instances", name), setInstance(name, false)},
			Transition{fmt.Sprintf("user: adds %s back to spec.mysql.instances", name), setInstance(name, true)})
	}
	for i, t := range out {
		apply, name := t.Apply, t.Name
		out[i].Apply = func(w *World) bool {
			ok := apply(w)
			w.EditedAt += " " + name
			return ok
		}
	}
	return out
}

// specNote is what the spec edits changed, for traces.
func specNote(w *World) string {
	var parts []string
	if v, ok := w.Set.Annotations[UsersAnnotation]; ok {
		parts = append(parts, "users="+v)
	}
	if v, ok := w.Set.Annotations[InstancesAnnotation]; ok {
		parts = append(parts, "instances="+v)
	}
	if !w.consumerListed() {
		parts = append(parts, "consumers=none")
	}
	if w.Orphan {
		parts = append(parts, "pod-unlisted")
	}
	for _, in := range w.Instances {
		if a := in.acct(App2Key); a.Exists {
			s := a.Primary
			if a.Secondary != "" {
				s += "+" + a.Secondary
			}
			parts = append(parts, in.Name+".app2="+s)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " spec{" + strings.Join(parts, " ") + "}"
}

// Without implements engine.Narrower, as the MySQL backend's does.
func (b *modelBackend) Without(keys []string) (engine.Backend, bool) {
	if slices.Contains(keys, AdminKey) {
		return nil, false
	}
	c := *b
	c.without = keys
	return &c, true
}
