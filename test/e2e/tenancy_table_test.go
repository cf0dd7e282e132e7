package e2e

import (
	"fmt"
	"strings"
)

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if _, after, ok := strings.Cut(s, "denied request: "); ok {
		s = "policy: " + after
	}
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func attackTable(rows []attackRow) string {
	var b strings.Builder
	b.WriteString("attack | where refused | evidence\n--- | --- | ---\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%s | %s | %s\n", r.attack, r.refused, r.evidence)
	}
	return b.String()
}
