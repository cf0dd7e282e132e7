package explorer

import (
	"slices"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// TestRabbitMQAdopt: the set adopts legacy, a user the broker had before
// rekey (spec.rabbitmq.adopt, rabbitadopt.go), then rotates, discards,
// rolls back, recovers, is restored from backup, loses the broker for a
// while and is deleted with deletionPolicy Discard and Delete, with
// crashes. Every invariant holds (the adopted user left after deletion
// never carries the mark); the test fails unless the adopted user was
// claimed at provisioning, retired by the first rotation's discard,
// put back by a rollback, and handed back without the mark by the
// wind-down.
func TestRabbitMQAdopt(t *testing.T) {
	start, err := Start(Options{RabbitMQ: true, Adopt: true})
	if err != nil {
		t.Fatal(err)
	}
	if a := start.instance(broker).acct(rabbitAdopted); !a.Marked || !a.Accepts(rabbitAdoptedPassword) || start.Pod.Creds[rabbitUserKey] != rabbitAdopted || start.Set.Status.KeyGeneration != 1 {
		t.Fatalf("provisioning did not adopt %s as generation 1: %s", rabbitAdopted, start.Summary())
	}
	explorePolicies(t, Options{RabbitMQ: true, Adopt: true, Crashes: true, Backups: true, Deletion: true, Only: backendOnly("broker")},
		envInt("REKEY_EXPLORE_RABBITMQ_ADOPT_DEPTH", 6), map[string]func(*World) bool{
			"the adopted user retired by the first rotation": func(w *World) bool {
				st := w.Set.Status
				return st.LastRotationID == "r1" && st.Phase == v1.PhaseIdle && !w.instance(broker).acct(rabbitAdopted).Exists &&
					w.Pod.Creds[rabbitUserKey] == "app-g2"
			},
			"rolled back to the adopted user": func(w *World) bool {
				st, in := w.Set.Status, w.instance(broker)
				return st.LastRolledBackID == "r1" && !st.ResetPending && !in.acct("app-g2").Exists &&
					in.acct(rabbitAdopted).Marked && in.acct(rabbitAdopted).Accepts(rabbitAdoptedPassword)
			},
			"the adopted user handed back without the mark": func(w *World) bool {
				a := w.instance(broker).acct(rabbitAdopted)
				return woundDown(w) && a.Exists && !a.Marked && a.Accepts(rabbitAdoptedPassword)
			},
		})
}

// TestRabbitMQAdoptHand: someone changes the adopted user's password by
// hand (rabbitmqctl change_password), before or during its first
// rotation, and only rekey puts it right (the person's setting it back is
// left out): a recover's or a rollback's reset sets the password back,
// keeping the user's tags and so its mark (resetAdopted). Every invariant
// holds; the test fails unless the adopted user was put right that way,
// the set Idle with the pod logging in as it.
func TestRabbitMQAdoptHand(t *testing.T) {
	reached := false
	o := Options{RabbitMQ: true, Adopt: true, HandChanges: true, Crashes: true,
		Only: []string{"user: rotate r1", "user: abort (active", "user: recover c1", "consumer", "someone changes the current user's"},
		Observe: func(w *World) {
			reached = reached || handPutRight(rabbitAdopted)(w) && w.instance(broker).acct(rabbitAdopted).Marked
		}}
	explorePath(t, o, envInt("REKEY_EXPLORE_RABBITMQ_ADOPT_HAND_DEPTH", 7))
	if !reached {
		t.Error("never reached the hand-changed adopted user put right by rekey, marked, Idle, the pod on it")
	}
}

// TestRabbitMQAdoptRefused: the adopted user missing, or refusing the
// password the adopt Secret holds, is refused while the set provisions
// (ProvisionFailed, as the backend's ProveAdoption, testAdoptLifecycle):
// nothing is stored, nothing distributed, the user left as it was. Once
// the user logs in with it (the person fixed the Secret or the user), the
// set provisions with it as generation 1.
func TestRabbitMQAdoptRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		user Account
	}{
		{"wrong password", Account{Exists: true, Primary: "pw-other"}},
		{"no such user", Account{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := NewRabbitWorld()
			rabbitAdopt(w)
			in := w.instance(broker)
			in.set(rabbitAdopted, c.user)
			for range 3 {
				if _, err := w.Reconcile(""); err != nil {
					t.Fatal(err)
				}
			}
			if w.Set.Status.KeyGeneration != 0 || w.Source != nil && len(w.Source.Data) > 0 || w.Dist != nil || in.acct(rabbitAdopted) != c.user || len(in.Users) != 1 {
				t.Fatalf("a refused adoption changed something: %s", w.Summary())
			}
			if !slices.ContainsFunc(w.Warnings, func(s string) bool {
				return strings.Contains(s, string(reason.ProvisionFailed)) && strings.Contains(s, rabbitAdopted) && !strings.Contains(s, "pw-")
			}) {
				t.Fatalf("no ProvisionFailed warning naming %s: %v", rabbitAdopted, w.Warnings)
			}
			in.set(rabbitAdopted, Account{Exists: true, Primary: rabbitAdoptedPassword})
			for i := 0; i < 5 && w.Set.Status.KeyGeneration == 0; i++ {
				if _, err := w.Reconcile(""); err != nil {
					t.Fatal(err)
				}
			}
			if a := in.acct(rabbitAdopted); w.Set.Status.KeyGeneration != 1 || !a.Marked || string(w.Source.Data[rabbitUserKey]) != rabbitAdopted {
				t.Fatalf("the adoption did not go on once the password logged in: %s", w.Summary())
			}
		})
	}
}
