//go:build !rekeytest

package main

import "testing"

// TestFenceHasNoSwitchInUsersBuilds: REKEY_TEST_UNFENCED does nothing in
// a build without the rekeytest tag.
func TestFenceHasNoSwitchInUsersBuilds(t *testing.T) {
	for _, v := range []string{"1", "lease"} {
		t.Setenv("REKEY_TEST_UNFENCED", v)
		if got := testUnfenced(); got != "" {
			t.Fatalf("REKEY_TEST_UNFENCED=%s switched the fence to %q in a build without the rekeytest tag", v, got)
		}
	}
}
