package plugin

import (
	"fmt"
	"regexp"
	"strings"
)

// formats render a credential for show. Generated passwords are letters and
// digits, but adopted ones may hold anything, so every format escapes.
var formats = map[string]func(user, password string) (string, error){
	"plain": func(_, pw string) (string, error) { return pw + "\n", nil },
	"mycnf": func(user, pw string) (string, error) {
		u, err := mycnfValue(user)
		if err != nil {
			return "", err
		}
		p, err := mycnfValue(pw)
		if err != nil {
			return "", err
		}
		return "[client]\nuser=" + u + "\npassword=" + p + "\n", nil
	},
	"env": func(user, pw string) (string, error) {
		return "MYSQL_USER=" + shellQuote(user) + "\nMYSQL_PASSWORD=" + shellQuote(pw) + "\n", nil
	},
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
