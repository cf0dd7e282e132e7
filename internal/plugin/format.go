package plugin

import (
	"fmt"
	"regexp"
	"strings"
)

// Renderers for show. Generated secrets are letters and digits (and
// cephx keys base64), but adopted ones may hold anything, so every format
// that embeds a value in a syntax escapes it.

// plainLine prints the one value read, as it is, and a newline (always:
// a value that ends in a newline itself must still show it).
func plainLine(v []string) (string, error) { return v[0] + "\n", nil }

// endLine ends text with exactly the newline it lacks, if any: a keyring
// file already ends in one.
func endLine(text string) string {
	if strings.HasSuffix(text, "\n") {
		return text
	}
	return text + "\n"
}

// envLines writes NAME=value lines from name, value pairs, each value one
// shell word, so the output can be sourced.
func envLines(pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		b.WriteString(pairs[i] + "=" + shellQuote(pairs[i+1]) + "\n")
	}
	return b.String()
}

// mycnfClient is a [client] section of a MySQL option file.
func mycnfClient(user, pw string) (string, error) {
	u, err := mycnfValue(user)
	if err != nil {
		return "", err
	}
	p, err := mycnfValue(pw)
	if err != nil {
		return "", err
	}
	return "[client]\nuser=" + u + "\npassword=" + p + "\n", nil
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote makes s one POSIX shell word, so the env output can be sourced.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// mycnfValue writes s as a MySQL option-file value. The option-file parser
// unescapes \\ \n \t \r \b, strips leading and trailing spaces, ends the
// value at an unquoted '#', and strips one pair of matching outer quotes
// (inside which '#' and the other quote character are literal).
func mycnfValue(s string) (string, error) {
	esc := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\t", `\t`, "\r", `\r`, "\b", `\b`).Replace(s)
	if s != "" && s == strings.TrimSpace(s) && !strings.ContainsAny(s, `#'"`) {
		return esc, nil
	}
	switch {
	case !strings.Contains(s, `"`):
		return `"` + esc + `"`, nil
	case !strings.Contains(s, `'`):
		return `'` + esc + `'`, nil
	}
	return "", fmt.Errorf("this value holds both quote characters, which a my.cnf file cannot hold reliably: use --format plain or env")
}
