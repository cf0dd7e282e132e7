package e2e

import (
	"context"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// warningsSince lists the notes ("<reason>: <note>") of the Warning Events
// about the set last observed at or after since (a folded series counts at
// its last observation).
func warningsSince(t testing.TB, ns, name string, since time.Time) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		at := e.EventTime.Time
		if e.Series != nil {
			at = e.Series.LastObservedTime.Time
		}
		if e.Regarding.Name == name && e.Type == "Warning" && !at.Before(since) {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

// assertNoWarningSince fails if the set got a Warning Event since since:
// during a healthy rotation every Event is Normal (a Warning pages someone).
func assertNoWarningSince(t testing.TB, ns, name string, since time.Time, what string) {
	t.Helper()
	time.Sleep(time.Second) // Events are sent asynchronously
	if w := warningsSince(t, ns, name, since); len(w) > 0 {
		t.Fatalf("Warning Events during %s: %v", what, w)
	}
}
