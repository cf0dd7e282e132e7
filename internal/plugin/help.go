package plugin

import (
	"cmp"
	"fmt"
	"strings"

	"rekey.io/rekey/internal/backend/registry"
)

// backendHelp is a help table of what a command does with each registered
// backend (text picks the command's row), the backend's name in the first
// column; backends with nothing to say are left out.
func backendHelp(text func(registry.Help) string) string {
	ds := rankedDescribes()
	// The text starts two columns after the longest name, and never
	// before column 12, where it always did.
	col := 10
	for _, d := range ds {
		col = max(col, len(d.Name)+2)
	}
	var b strings.Builder
	for _, d := range ds {
		t := text(d.Help)
		if t == "" {
			continue
		}
		for i, line := range strings.Split(t, "\n") {
			name := ""
			if i == 0 {
				name = d.Name
			}
			fmt.Fprintf(&b, "  %-*s%s\n", col, name, line)
		}
	}
	return b.String()
}

// madeWords lists what a rotation makes on each registered backend, in
// the order of the help rows: "MySQL passwords, Ceph keys, a RabbitMQ
// user".
func madeWords() string {
	var made []string
	for _, d := range rankedDescribes() {
		made = append(made, cmp.Or(d.Help.New, d.Name+" "+cmp.Or(d.Secrets, unknownBackend.Secrets)))
	}
	return strings.Join(made, ", ")
}

// helpRow is a row of the overview's command table: the command, then
// text wrapped to 79 columns under itself.
func helpRow(command, text string) string {
	const indent, width = 11, 79
	var b strings.Builder
	line := fmt.Sprintf("  %-*s", indent-2, command)
	for _, w := range strings.Fields(text) {
		if len(line) > indent && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = strings.Repeat(" ", indent)
		}
		if len(line) > indent {
			line += " "
		}
		line += w
	}
	return b.String() + line + "\n"
}
