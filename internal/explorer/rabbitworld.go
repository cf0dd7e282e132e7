package explorer

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The RabbitMQ world's side of the invariants, traces and transitions
// (the backend model is rabbitmodel.go).

// loginsOf are the accounts creds (a pod's, or a Secret's, by source
// Secret key) log in as, with the password each: MySQL's users are the
// keys themselves; RabbitMQ's one user, and PostgreSQL's one login role,
// are named by the username key.
func loginsOf(w *World, creds map[string]string) map[string]string {
	if w.ceph() {
		return cephLogins(creds)
	}
	if w.postgres() {
		return pgCredLogins(w, creds) // each login's keys (pglogins.go)
	}
	if !w.rabbit() {
		return creds
	}
	if user := creds[rabbitUserKey]; user != "" {
		return map[string]string{user: creds[rabbitPasswordKey]}
	}
	return nil
}

// rabbitLeftValid is "nothing left valid after deletion" on the broker:
// with deletionPolicy Delete no user the set made is left; with Discard
// only the user its consumers were given stays, without the set's mark,
// with the password they were given.
func rabbitLeftValid(w *World) string {
	if d := rabbitAdoptedLeftValid(w); d != "" {
		return d
	}
	return generationsLeftValid(w, w.instance(broker))
}

// generationsLeftValid is it on in, for a backend that makes a user (a
// login role) per generation, named by the username key: RabbitMQ's and
// PostgreSQL's.
func generationsLeftValid(w *World, in *Instance) string {
	if in == nil || !in.Present || w.returned(in) {
		return ""
	}
	served := map[string]string{}
	if w.Dist != nil {
		served = loginsOf(w, map[string]string{rabbitUserKey: string(w.Dist.Data[rabbitUserKey]), rabbitPasswordKey: string(w.Dist.Data[rabbitPasswordKey])})
	}
	for name, a := range in.Users {
		if !w.mine(name) || !a.Exists || a.Hand {
			continue
		}
		pw, given := served[name]
		switch {
		case a.Marked:
			return fmt.Sprintf("the set is %s (deletionPolicy %s) and user %s still carries its mark", goneOrEmptied(w), w.Set.Spec.OnDeletion(), name)
		case !given && !lostElsewhere(w, in, a.Primary):
			return fmt.Sprintf("the set is %s (deletionPolicy %s) and user %s, which its consumers were not given, still logs in", goneOrEmptied(w), w.Set.Spec.OnDeletion(), name)
		case given && a.Primary != pw:
			return fmt.Sprintf("the set is %s (deletionPolicy %s) and user %s accepts %s, while its consumers were given %s", goneOrEmptied(w), w.Set.Spec.OnDeletion(), name, a.Primary, pw)
		}
	}
	return ""
}

// NewRabbitWorld is a set with one consumer on an empty broker: rekey
// makes the first generation's user when it provisions.
func NewRabbitWorld() *World {
	w := newSetWorld(setName, "uid-1", distName, webName)
	w.Set.Annotations[Annotation] = RabbitWorld
	w.FixedAdmin = true // the broker's admin is not the set's to rotate
	w.Instances = []*Instance{{Name: broker, Present: true, Users: map[string]Account{}}}
	return w
}

// The adopted user (option Adopt, rabbitadopt.go): legacy, which the
// broker has before rekey, without any mark, and whose password the
// Secret spec.rabbitmq.adopt.passwordSecretRef names holds.
const (
	// RabbitAdoptAnnotation is spec.rabbitmq.adopt.user in the model.
	RabbitAdoptAnnotation = "explorer.rekey.io/rabbitmq-adopt"
	rabbitAdopted         = "legacy"
	rabbitAdoptedPassword = "pw-legacy"
)

// rabbitAdopt makes w's set adopt legacy, which the broker has already:
// provisioning proves its password and marks it as generation 1.
func rabbitAdopt(w *World) {
	w.Set.Annotations[RabbitAdoptAnnotation] = rabbitAdopted
	w.instance(broker).set(rabbitAdopted, Account{Exists: true, Primary: rabbitAdoptedPassword})
}

// rabbitTransitions: the broker stops answering, and answers again.
func rabbitTransitions() []Transition {
	return []Transition{
		{"broker stops answering", func(w *World) bool { return outage(broker, true)(w) }},
		{"broker answers again", func(w *World) bool { return outage(broker, false)(w) }},
	}
}

// rabbitUsers is the broker in a trace: each user, its password, and
// whether it carries the set's mark.
func rabbitUsers(in *Instance) string {
	var users []string
	for name, a := range in.Users {
		mark := ""
		if a.Marked {
			mark = "*"
		}
		users = append(users, name+mark+"="+a.Primary)
	}
	sort.Strings(users)
	down := ""
	if in.Down {
		down = " down"
	}
	return in.Name + "{" + strings.Join(users, " ") + down + "}" + pgNote(in)
}

// shown is, for a trace, the application credential a Secret or the pod
// holds (get reads a key): the password of the set's application user, or
// RabbitMQ's user/password ("" when it holds none).
func (w *World) shown(get func(k string) string) string {
	if w.ceph() {
		return get(cephKeys(w.Set)[0])
	}
	if w.postgres() {
		return pgShown(w, get)
	}
	if !w.rabbit() {
		return get(w.appKey())
	}
	if get(rabbitUserKey) == "" {
		return ""
	}
	return get(rabbitUserKey) + "/" + get(rabbitPasswordKey)
}

// rabbitStaleRestore is staleRestore on the broker: the restore dropped
// the generations the broker has, and the current user it brought back is
// not one of them (deleted by the discard the backup predates).
func rabbitStaleRestore(w *World) bool {
	in := w.instance(broker)
	if in == nil || !in.Present {
		return false
	}
	if in.acct(string(w.Source.Data[rabbitUserKey])).Accepts(string(w.Source.Data[rabbitPasswordKey])) {
		return false
	}
	for _, name := range (&rabbitBackend{w: w, cs: w.Set}).generations(in) {
		if slices.Contains(w.Lost, in.acct(name).Primary) {
			return true
		}
	}
	return false
}
