//go:build rekeytest

package main

import (
	"net/http"
	"strings"

	"k8s.io/client-go/rest"

	"rekey.io/rekey/internal/failpoint"
)

// testLeaderConfig is cfg for the leader elector, with each of its
// requests to the Lease first passed to failpoint.LeaderRequest: a
// ":hold" failpoint (REKEY_FAILPOINT) holds them there, so that a leader
// paused and woken by the two-manager tests makes its stale backend calls
// before its elector ends the process (see internal/failpoint/hold.go).
// Only the manager the end-to-end tests build (-tags rekeytest) has it.
func testLeaderConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return heldElector{rt} })
	return c
}

type heldElector struct{ next http.RoundTripper }

func (h heldElector) RoundTrip(r *http.Request) (*http.Response, error) {
	// Only the Lease: the same configuration posts the elector's Events.
	if strings.Contains(r.URL.Path, "/leases/") || strings.HasSuffix(r.URL.Path, "/leases") {
		failpoint.LeaderRequest()
	}
	return h.next.RoundTrip(r)
}

// WrappedRoundTripper lets client-go reach the transport underneath (to
// cancel a request that timed out); a request held at the gate stays held.
func (h heldElector) WrappedRoundTripper() http.RoundTripper { return h.next }
