//go:build !rekeytest

package main

import (
	"testing"

	"k8s.io/client-go/rest"
)

// TestElectorNotHeldInUsersBuilds: a build without the rekeytest tag
// elects with the manager's own configuration, nothing in the way of its
// requests (the tests' build passes them to failpoint.LeaderRequest).
func TestElectorNotHeldInUsersBuilds(t *testing.T) {
	if c := testLeaderConfig(&rest.Config{Host: "https://127.0.0.1:6443"}); c != nil {
		t.Fatalf("testLeaderConfig gave the elector a configuration of its own in a build without the rekeytest tag: %+v", c)
	}
}
