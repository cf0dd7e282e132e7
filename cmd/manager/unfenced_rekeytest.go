//go:build rekeytest

package main

import "os"

// testUnfenced lets the HA tests show what the fence prevents, in the
// manager they build with -tags rekeytest (test/e2e buildManager) and in
// no other: REKEY_TEST_UNFENCED "1" turns the fence off (no Lease check,
// no term), "lease" keeps only what the backends check themselves.
func testUnfenced() string { return os.Getenv("REKEY_TEST_UNFENCED") }
