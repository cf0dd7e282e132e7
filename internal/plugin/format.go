package plugin

import (
	"regexp"
	"strings"
)

// Renderers for show's env output and -o. Generated secrets are letters
// and digits (and cephx keys base64), but adopted ones may hold anything,
// so a value embedded in a syntax is escaped.

// envLines writes NAME=value lines from name, value pairs, each value one
// shell word, so the output can be sourced.
func envLines(pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		b.WriteString(pairs[i] + "=" + shellQuote(pairs[i+1]) + "\n")
	}
	return b.String()
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote makes s one POSIX shell word, so the env output can be sourced.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
