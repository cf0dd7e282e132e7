package e2e

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// ackerGroup is the consumer group an acker declares.
func ackerGroup(member string) v1.ConsumerGroup {
	return v1.ConsumerGroup{Name: "daemons", Members: []string{member}}
}

// ackEveryDistribution plays the automation outside Kubernetes that
// redeploys a consumer group's members whenever the distributed
// credentials change and then reports them with kubectl rekey ack — what
// lets discardPolicy AfterRollout retire old credentials for a set whose
// consumers rekey cannot watch. It acknowledges each new distribution
// once, as soon as it sees it, until the test ends.
func ackEveryDistribution(t testing.TB, ns, set, member string) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		acked := ""
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			cs := &v1.CredentialSet{}
			if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: set}, cs); err != nil {
				continue
			}
			h := cs.Status.SecretHash
			if h == "" || h == acked || cs.Status.Phase != v1.PhaseDistributed {
				continue
			}
			if _, err := ack(t, ns, set, "daemons", h, member); err == nil {
				acked = h
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}
