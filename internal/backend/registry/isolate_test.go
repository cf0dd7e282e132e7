package registry

import (
	"maps"
	"slices"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// isolate gives a test an empty registry and puts back what was there
// when it ends: tests that register backends of their own then pass in
// any order (go test -shuffle).
func isolate(t *testing.T) {
	t.Helper()
	mu.Lock()
	savedEntries, savedFormats := slices.Clone(entries), maps.Clone(formats)
	entries, formats = nil, map[v1.SecretFormat]Format{}
	mu.Unlock()
	pacersMu.Lock()
	savedPacers := slices.Clone(pacers)
	pacers = nil
	pacersMu.Unlock()
	t.Cleanup(func() {
		mu.Lock()
		entries, formats = savedEntries, savedFormats
		mu.Unlock()
		pacersMu.Lock()
		pacers = savedPacers
		pacersMu.Unlock()
	})
}
