package explorer

import (
	"strings"
	"testing"
)

// replayLabels starts o's world and takes, one at a time, the successor
// labelled with each of labels: a path a walk printed, replayed as it ran.
func replayLabels(t *testing.T, o Options, labels []string) *World {
	t.Helper()
	w, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	return replayFrom(t, w, o, labels)
}

// replayFrom takes the transitions labelled labels from w, one after the
// other; a label matches exactly, or else as the start of one (a
// reconcile's label names its error).
func replayFrom(t *testing.T, w *World, o Options, labels []string) *World {
	t.Helper()
	for _, l := range labels {
		var next *World
		var seen []string
		for _, s := range Successors(w, o) {
			seen = append(seen, s.Label)
			if s.Label == l || next == nil && strings.HasPrefix(s.Label, l) {
				next = s.World
			}
			if s.Label == l {
				break
			}
		}
		if next == nil {
			t.Fatalf("%q is not a transition of %s; those are:\n%s", l, w.Summary(), strings.Join(seen, "\n"))
		}
		w = next
	}
	return w
}

// An InPlace rotation r1 distributed and its pods restarted onto its key;
// the set's status and source Secret restored from a backup taken before
// it (which forgets that r1 was used); r1 requested again; and the key
// rotated by hand, so that the refusal names deleting the entity from the
// source Secret. The documented actions then read the key back and run
// the second r1, whose restart value was the first's ("r1"): the pods'
// template already carried it, so no pod restarted onto the second r1's
// key, which replaced the one they held (no wedge, 1 step from the replayed
// path; found by the InPlace random walks, seed 5, 10 steps). Now each
// distribution's restart value carries the source Secret's version
// (engine.DistributedRestartID). Explored from the restore's end with the
// person's rotation and crashes; the test also fails unless the documented
// actions bring the set to Idle after the person's rotation, r1 completed
// with the pods on the monitor's key, under a value not the first r1's.
func TestPathRestartIDTakenAgain(t *testing.T) {
	o := Options{CephInPlace: true, Crashes: true, Backups: true, HandChanges: true}
	w := replayLabels(t, o, []string{"user: rotate r1", "reconcile", "consumer pod restarts (reads the Secret)",
		"status and source Secret restored from backup", "user: rotate r1"})
	first := w.Pod.Template
	exploreFrom(t, w, o, 4)
	c := replayLabels(t, o, []string{"user: rotate r1", "reconcile", "consumer pod restarts (reads the Secret)",
		"status and source Secret restored from backup", "user: rotate r1", "someone rotates client.app's key by hand (ceph auth rotate)"})
	recovers := 0
	var trace []string
	for i := 0; i < drainSteps && !settled(c); i++ {
		trace = append(trace, drainStep(c, &recovers))
	}
	st := c.Set.Status
	if !settled(c) || st.LastRotationID != "r1" || st.KeyGeneration != 2 || c.Pod.Creds[cephBase] != monKey(c) || c.Pod.Template == first {
		t.Errorf("the documented actions (%s) left %s; want r1 completed at generation 2, the pod on the monitor's key under a restart value other than the first r1's %q",
			strings.Join(trace, ", "), c.Summary(), first)
	}
}

// A set recovered (a reset owed); deleted (deletionPolicy Discard); its
// status and source Secret restored from the backup, which puts back the
// status it had before the recovery; the manager crashed right after the
// wind-down released its login (the set's mark taken off); then a
// reconcile from a copy a lagging cache holds: the set before its
// deletion, with the recover request, and the status the restore put
// back. Its status write passed (the status alone was compared), and the
// deleted set owed the reset of a recovery, which every reconcile then
// refused on the released login (NotOwned): the finalizer never went (no
// wedge; found by the PostgreSQL world's random walks, seed 3, 32 steps;
// RabbitMQ's release reaches the same). Now a status write also holds the
// set to not being deleted since the copy it was decided on. Replayed on
// PostgreSQL and RabbitMQ, the stale reconcile must write nothing; then
// explored with crashes and stale reads.
func TestPathStaleRecoverAfterRelease(t *testing.T) {
	for _, c := range []struct {
		name  string
		o     Options
		crash string
	}{
		{"PostgreSQL", Options{Postgres: true, Crashes: true, Backups: true, Deletion: true, StaleReads: true}, "release/postgres-login-released"},
		{"RabbitMQ", Options{RabbitMQ: true, Crashes: true, Backups: true, Deletion: true, StaleReads: true}, "release/rabbitmq-user-released"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := replayLabels(t, c.o, []string{"user: recover c1", "reconcile", "user: delete the set",
				"status and source Secret restored from backup", "manager crashes after " + c.crash + "#1"})
			if w.Older == nil || w.Older.DeletionTimestamp != nil || w.Older.Annotations["rekey.io/recover"] != "c1" {
				t.Fatalf("the replayed path left no copy from before the deletion with the recover request: %s", w.Summary())
			}
			if err := w.ReconcileStale(); err != nil {
				t.Log(err)
			}
			if st := w.Set.Status; st.ResetPending || st.LastRecoverID != "" {
				t.Errorf("a reconcile from a copy read before the deletion wrote a recovery: %s", w.Summary())
			}
			exploreFrom(t, w, c.o, 3)
		})
	}
}
