//go:build !rekeytest

package main

import "k8s.io/client-go/rest"

// testLeaderConfig is the end-to-end tests' way to hold a paused leader's
// elector (elector_rekeytest.go). A build without the rekeytest tag elects
// with the manager's own configuration (nil).
func testLeaderConfig(*rest.Config) *rest.Config { return nil }
