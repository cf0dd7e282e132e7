package plugin

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

func TestAckRecordsBatches(t *testing.T) {
	ns := namespace(t)
	cs := hostsSet(ns, "nova")
	cs.Spec.ConsumerGroups = []v1.ConsumerGroup{{Name: "compute", Members: []string{"c0", "c1", "c2"}}}
	create(t, cs)
	mustFail(t, ns, "has not distributed credentials yet", "ack", "nova", "--group", "compute", "--members", "c0")
	setStatus(t, ns, "nova", func(st *v1.CredentialSetStatus) { idle(1)(st); st.SecretHash = "aaaaaaaaaaaa" })

	mustFail(t, ns, "ack needs --group and --members", "ack", "nova", "--group", "compute")
	mustFail(t, ns, `has no consumer group "db"; its groups are: compute`, "ack", "nova", "--group", "db", "--members", "c0")
	mustFail(t, ns, "group compute of "+ns+"/nova has no members c9; its members are: c0, c1, c2", "ack", "nova", "--group", "compute", "--members", "c0,c9")
	mustFail(t, ns, "now hold aaaaaaaaaaaa, not bbbbbbbbbbbb", "ack", "nova", "--group", "compute", "--members", "c0", "--secret-hash", "bbbbbbbbbbbb")

	out, _, err := kubectl(t, ns, "ack", "nova", "--group", "compute", "--members", "c1")
	if err != nil || !strings.Contains(out, "1/3 members recorded") {
		t.Fatalf("first batch: %q %v", out, err)
	}
	out, _, err = kubectl(t, ns, "ack", "nova", "--group", "compute", "--members", "c0,c1", "--secret-hash", "aaaaaaaaaaaa")
	if err != nil || !strings.Contains(out, "2/3 members recorded") {
		t.Fatalf("second batch: %q %v", out, err)
	}
	if got := get(t, ns, "nova").Annotations[engine.AckAnnotationPrefix+"compute"]; got != "aaaaaaaaaaaa:c0,c1" {
		t.Fatalf("annotation %q", got)
	}
	// A new distribution: the next ack starts over.
	setStatus(t, ns, "nova", func(st *v1.CredentialSetStatus) { st.SecretHash = "cccccccccccc" })
	if _, _, err := kubectl(t, ns, "ack", "nova", "--group", "compute", "--members", "c2"); err != nil {
		t.Fatal(err)
	}
	if got := get(t, ns, "nova").Annotations[engine.AckAnnotationPrefix+"compute"]; got != "cccccccccccc:c2" {
		t.Fatalf("annotation after a new distribution %q", got)
	}

	// status shows the members' coverage next to the consumers.
	setStatus(t, ns, "nova", func(st *v1.CredentialSetStatus) {
		st.ConsumersUpdated = "0/1"
		st.Consumers = []v1.ConsumerStatus{{Kind: v1.KindGroup, Name: "compute", SecretHash: "cccccccccccc", MembersUpdated: []string{"c2"}, Coverage: "1/3"}}
	})
	out, _, err = kubectl(t, ns, "status")
	if err != nil || !strings.Contains(out, "0/1 members 1/3") {
		t.Fatalf("status must show member coverage:\n%s %v", out, err)
	}
}

// Batches acknowledged at the same time all land: each ack that loses the
// race to write the annotation reads it again and merges its members.
func TestAckConcurrentBatchesAllRecorded(t *testing.T) {
	ns := namespace(t)
	cs := hostsSet(ns, "nova")
	members := []string{"c0", "c1", "c2", "c3"}
	cs.Spec.ConsumerGroups = []v1.ConsumerGroup{{Name: "compute", Members: members}}
	create(t, cs)
	setStatus(t, ns, "nova", func(st *v1.CredentialSetStatus) { idle(1)(st); st.SecretHash = "aaaaaaaaaaaa" })
	errs := make(chan error, len(members))
	for _, m := range members {
		go func() {
			_, _, err := kubectl(t, ns, "ack", "nova", "--group", "compute", "--members", m)
			errs <- err
		}()
	}
	for range members {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := get(t, ns, "nova").Annotations[engine.AckAnnotationPrefix+"compute"]; got != "aaaaaaaaaaaa:c0,c1,c2,c3" {
		t.Fatalf("annotation %q, want every member recorded", got)
	}
}
