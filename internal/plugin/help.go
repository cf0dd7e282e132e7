package plugin

import (
	"fmt"
	"sort"
	"strings"

	"rekey.io/rekey/internal/backend/registry"
)

// backendHelp is a help table of what a command does with each registered
// backend (text picks the command's row), the backend's name in the first
// column; backends with nothing to say are left out.
func backendHelp(text func(registry.Help) string) string {
	entries := registry.Entries()
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Describe.Rank < entries[j].Describe.Rank })
	var b strings.Builder
	for _, e := range entries {
		t := text(e.Describe.Help)
		if t == "" {
			continue
		}
		for i, line := range strings.Split(t, "\n") {
			name := ""
			if i == 0 {
				name = e.Describe.Name
			}
			fmt.Fprintf(&b, "  %-10s%s\n", name, line)
		}
	}
	return b.String()
}
