package mysqlkube

import (
	"fmt"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/mysql"
	"rekey.io/rekey/internal/backend/registry"
)

// credential is one user's password, as show prints it.
func credential(cs *v1.CredentialSet, p registry.Pick) (registry.Credential, error) {
	users, err := mysql.ResolveUsers(cs.Spec.MySQL)
	if err != nil {
		return registry.Credential{}, fmt.Errorf("credentialset %q: %w", cs.Name, err)
	}
	u, err := pickUser(cs.Name, users, p.Identity)
	if err != nil {
		return registry.Credential{}, err
	}
	c := registry.Credential{Who: "user " + u.String(), Keys: []string{u.Key},
		Note: "this is its new password (the old one works until discard)"}
	switch p.Format {
	case "mycnf":
		c.Render = func(v []string) (string, error) { return mycnfClient(u.Name, v[0]) }
	case "env":
		c.Fields = func(v []string) []string { return []string{"MYSQL_USER", u.Name, "MYSQL_PASSWORD", v[0]} }
	default:
		c.Render = registry.PlainLine
	}
	return c, nil
}

// userChoices are the set's users as --user names them, for messages
// (none when the spec's users cannot be resolved: show says why itself).
func userChoices(cs *v1.CredentialSet) []string {
	users, _ := mysql.ResolveUsers(cs.Spec.MySQL)
	var names []string
	for _, u := range users {
		names = append(names, u.String())
	}
	return names
}

// pickUser finds --user among the set's users by NAME or NAME@HOST;
// without --user, a single user is the answer and several are listed.
func pickUser(set string, users []mysql.User, want string) (mysql.User, error) {
	var names []string
	for _, u := range users {
		names = append(names, u.String())
	}
	if want == "" {
		if len(users) == 1 {
			return users[0], nil
		}
		return mysql.User{}, fmt.Errorf("credentialset %q has %d users: choose one with --user (%s)", set, len(users), strings.Join(names, ", "))
	}
	var found []mysql.User
	for _, u := range users {
		if u.Name == want || u.String() == want {
			found = append(found, u)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return mysql.User{}, fmt.Errorf("credentialset %q has no user %q: use one of %s", set, want, strings.Join(names, ", "))
	}
	return mysql.User{}, fmt.Errorf("credentialset %q has user %q on several hosts: say which with --user NAME@HOST (%s)", set, want, strings.Join(names, ", "))
}

// mycnfClient is a [client] section of a MySQL option file. Adopted
// passwords may hold anything, so each value is escaped.
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
