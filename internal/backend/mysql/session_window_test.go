package mysql

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/testenv"
)

// TestReplicasReadOnlyWhileRekeyLogsIn: a replica is writable only while
// rekey's own account statements run on it. A cluster manager that finds
// a replica writable takes it back: MOCO's loop kills every connection to
// it, rekey's session included, and the phase has to start over; a session
// that kept super_read_only off while it logged in as each user (slow: one
// TLS handshake per user) lost that race again and again on a loaded
// machine. At the moment Provision and Retire start logging in on an
// instance, every replica is super_read_only again; the statements they
// ran on the replicas (the discard) did run, and left them
// super_read_only.
func TestReplicasReadOnlyWhileRekeyLogsIn(t *testing.T) {
	ctx := context.Background()
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{})
	f := newRepairFixture(t, c, "w")
	// One instance at a time, so that no other instance's statements run
	// while one logs in.
	f.b.Concurrency = 1
	var seen []string
	failpoint.Crash = func(name string) {
		if !strings.HasSuffix(name, "/logging-in") {
			return
		}
		for _, r := range c.Replicas {
			v, err := r.QueryString("SELECT @@GLOBAL.super_read_only")
			seen = append(seen, fmt.Sprintf("%s: %s super_read_only=%s (%v)", name, r.Name, v, err))
		}
	}
	t.Cleanup(func() { failpoint.Crash = nil })

	// Provision again (the fixture provisioned once): the users exist, it
	// logs in as each and marks nothing new.
	if _, err := f.b.Provision(ctx, f.cur); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.Apply(ctx, f.cur, f.pending, 2); err != nil {
		t.Fatal(err)
	}
	if err := f.b.Retire(ctx, f.cur, f.pending); err != nil {
		t.Fatal(err)
	}
	failpoint.Crash = nil
	want := 2 * len(c.Instances()) * len(c.Replicas) // Provision and Retire, each instance, each replica
	if len(seen) != want {
		t.Fatalf("%d observations at logins, want %d: %q", len(seen), want, seen)
	}
	for _, s := range seen {
		if !strings.Contains(s, "super_read_only=1 (<nil>)") {
			t.Fatalf("a replica was writable while rekey logged in: %s (all: %q)", s, seen)
		}
	}
	for _, i := range c.Instances() {
		f.accepts(t, i, false, true) // discarded everywhere; replicas super_read_only
	}
}
