package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"

	"rekey.io/rekey/internal/engine"
)

// grantLine is one line of SHOW GRANTS: privileges on one object. SHOW
// GRANTS for the current user includes the privileges of its active
// roles (verified on MySQL 9.7), which the privilege tables alone do not.
type grantLine struct {
	privs       map[string]bool // upper case; ALL PRIVILEGES as "ALL"
	db, table   string          // unquoted; "*" for a wildcard
	grantOption bool
}

var (
	grantPattern = regexp.MustCompile("^GRANT (.+) ON (\\S+) TO .+$")
	// columnList is a column privilege's list, "SELECT (`a`, `b`)".
	columnList = regexp.MustCompile(`\([^)]*\)`)
)

// parseGrants reads SHOW GRANTS lines; role grants (no ON) and lines it
// does not understand are left out, so a privilege is only ever found
// missing, never found present by mistake.
func parseGrants(lines []string) []grantLine {
	var out []grantLine
	for _, l := range lines {
		m := grantPattern.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil || strings.HasPrefix(m[1], "PROXY") {
			continue
		}
		db, table, ok := splitObject(m[2])
		if !ok {
			continue
		}
		g := grantLine{privs: map[string]bool{}, db: db, table: table, grantOption: strings.HasSuffix(strings.TrimSpace(l), "WITH GRANT OPTION")}
		for _, p := range strings.Split(columnList.ReplaceAllString(m[1], ""), ",") {
			p = strings.ToUpper(strings.TrimSpace(p))
			if p == "ALL PRIVILEGES" {
				p = "ALL"
			}
			if p != "" {
				g.privs[p] = true
			}
		}
		out = append(out, g)
	}
	return out
}

// splitObject splits `db`.`table` (or *.*, `db`.*) into its names.
func splitObject(o string) (db, table string, ok bool) {
	parts := strings.SplitN(o, ".", 2)
	if len(parts) != 2 {
		return "", "", false
	}
	unq := func(s string) string {
		if len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' {
			return strings.ReplaceAll(s[1:len(s)-1], "``", "`")
		}
		return s
	}
	return unq(parts[0]), unq(parts[1]), true
}

// holds reports whether the grants give priv on db.table (db, table "*"
// for a global privilege), and with the grant option when grantable.
func holds(grants []grantLine, priv, db, table string, grantable bool) bool {
	for _, g := range grants {
		if !(g.db == "*" || g.db == db && (g.table == "*" || g.table == table)) {
			continue
		}
		if grantable && !g.grantOption {
			continue
		}
		if g.privs[priv] || allStatic(g) && (priv == "ALL" || !dynamicPrivilege(priv)) {
			return true
		}
	}
	return false
}

// allStatic: the line grants every static privilege of its level. SHOW
// GRANTS writes ALL PRIVILEGES on a database or table, but spells the
// static privileges out on *.*; a few that only a full grant has stand
// for the rest.
func allStatic(g grantLine) bool {
	if g.privs["ALL"] {
		return true
	}
	for _, p := range []string{"SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "INDEX", "TRIGGER", "EVENT", "LOCK TABLES", "CREATE ROUTINE"} {
		if !g.privs[p] {
			return false
		}
	}
	return true
}

// dynamicPrivilege: a privilege ALL PRIVILEGES in a GRANT line does not
// stand for. SHOW GRANTS lists dynamic privileges (BACKUP_ADMIN, ...) on
// a line of their own and spells static ones out; ALL appears only where
// everything at that level is granted, which for a database or table
// holds no dynamic privilege.
func dynamicPrivilege(p string) bool { return strings.Contains(p, "_") }

// privilegeProbes are what the check learns by running the backend's own
// reads (roles included): whether each was denied.
type privilegeProbes struct {
	mysqlUser    bool // SELECT on mysql.user denied
	cloneStatus  bool // SELECT on performance_schema.clone_status denied
	replStatus   bool // SHOW REPLICA STATUS denied
	sessionLogBn bool // SET SESSION sql_log_bin denied
}

// missingPrivilege is one privilege the admin lacks on an instance: what,
// why rekey needs it, and the statement that grants it.
type missingPrivilege struct {
	what, why, grant string
}

// privilegeInput is what the privileges of one instance are judged on.
type privilegeInput struct {
	probes privilegeProbes
	grants []grantLine
	// readOnly: the instance is read-only now, so rekey lifts
	// super_read_only there around its statements.
	readOnly bool
	// create are the users rekey would create on the instance (missing
	// there), whose grants the admin must be able to give.
	create []User
	// account is the admin as MySQL knows it, quoted ('name'@'host').
	account string
}

// missingPrivileges decides which privileges the admin lacks for what the
// backend's statements do on one instance. Pure: the probes and grants
// are read elsewhere.
func missingPrivileges(in privilegeInput) []missingPrivilege {
	var out []missingPrivilege
	add := func(what, why, privs, on string) {
		out = append(out, missingPrivilege{what, why, fmt.Sprintf("GRANT %s ON %s TO %s", privs, on, in.account)})
	}
	if in.probes.mysqlUser {
		add("SELECT on mysql.user", "rekey reads each user's row (secondary password, its mark) before it changes it", "SELECT", "mysql.user")
	}
	if in.probes.cloneStatus {
		// On the schema: a grant on the table fails where the clone
		// plugin is not installed, yet reading it is denied all the same.
		add("SELECT on performance_schema.clone_status", "the health gate reads whether a CLONE is running", "SELECT", "performance_schema.*")
	}
	if in.probes.replStatus {
		add("REPLICATION CLIENT", "the health gate reads each instance's replication (SHOW REPLICA STATUS)", "REPLICATION CLIENT", "*.*")
	}
	if in.probes.sessionLogBn {
		add("SYSTEM_VARIABLES_ADMIN", "rekey turns binary logging off for its own session (sql_log_bin=0) so no credential change replicates", "SYSTEM_VARIABLES_ADMIN", "*.*")
	}
	if !holds(in.grants, "CREATE USER", "*", "*", false) {
		add("CREATE USER", "rekey creates users and changes their passwords (CREATE USER, ALTER USER ... RETAIN CURRENT PASSWORD, DISCARD OLD PASSWORD)", "CREATE USER", "*.*")
	}
	super := holds(in.grants, "SUPER", "*", "*", false)
	if in.readOnly && !in.probes.sessionLogBn && !holds(in.grants, "SYSTEM_VARIABLES_ADMIN", "*", "*", false) && !super {
		add("SYSTEM_VARIABLES_ADMIN", "the instance is read-only, and rekey lifts super_read_only around its statements", "SYSTEM_VARIABLES_ADMIN", "*.*")
	}
	// read_only stays on while rekey works (it marks the instance's
	// role), and lets only these accounts write (verified on MySQL 9.7:
	// CREATE USER fails with error 1290 otherwise).
	if in.readOnly && !holds(in.grants, "CONNECTION_ADMIN", "*", "*", false) && !super {
		add("CONNECTION_ADMIN", "the instance is read-only (read_only), which lets only such an account change users there", "CONNECTION_ADMIN", "*.*")
	}
	out = append(out, missingGrantable(in)...)
	return out
}

// missingGrantable are the privileges the admin must hold with the grant
// option to give the users it creates their grants.
func missingGrantable(in privilegeInput) []missingPrivilege {
	var out []missingPrivilege
	seen := map[string]bool{}
	for _, u := range in.create {
		for _, g := range u.Grants {
			db, table, _ := strings.Cut(g.Object, ".")
			for _, p := range g.Privileges {
				priv := strings.ToUpper(p)
				if priv == "ALL PRIVILEGES" {
					priv = "ALL"
				}
				if holds(in.grants, priv, db, table, true) || seen[priv+" "+g.Object] {
					continue
				}
				seen[priv+" "+g.Object] = true
				on := ident(db) + "." + ident(table)
				out = append(out, missingPrivilege{
					what:  fmt.Sprintf("%s on %s WITH GRANT OPTION", p, g.Object),
					why:   fmt.Sprintf("rekey creates user %s with it", u),
					grant: fmt.Sprintf("GRANT %s ON %s TO %s WITH GRANT OPTION", p, on, in.account),
				})
			}
		}
	}
	return out
}

// checkPrivileges probes what the backend's reads need (as the backend
// reads, so roles count) and reads SHOW GRANTS for what only a change
// would probe. acctErr is how reading mysql.user went.
func (b *Backend) checkPrivileges(ctx context.Context, conn *sql.Conn, inst Instance, accts map[string]account, acctErr error) ([]engine.Finding, error) {
	denied := func(err error) bool { n := mysqlErrno(err); return n == 1142 || n == 1227 || n == 1044 }
	var p privilegeProbes
	switch {
	case denied(acctErr):
		p.mysqlUser = true
	case acctErr != nil:
		return nil, acctErr
	}
	var state sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT STATE FROM performance_schema.clone_status LIMIT 1").Scan(&state); denied(err) {
		p.cloneStatus = true
	}
	if _, err := replicaStatus(ctx, conn); denied(err) {
		p.replStatus = true
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION sql_log_bin=0"); denied(err) {
		p.sessionLogBn = true
	}
	r, err := readRoleValues(ctx, conn)
	if err != nil {
		return nil, err
	}
	lines, err := showGrants(ctx, conn)
	if err != nil {
		return nil, err
	}
	var create []User
	for _, u := range b.Users {
		if !accts[u.String()].exists && acctErr == nil {
			create = append(create, u)
		}
	}
	account, err := currentAccount(ctx, conn, b.AdminUser)
	if err != nil {
		return nil, err
	}
	missing := missingPrivileges(privilegeInput{probes: p, grants: parseGrants(lines), readOnly: r, create: create, account: account})
	if len(missing) == 0 {
		return []engine.Finding{{Target: inst.Name, Check: "privileges", OK: true, Message: "the admin user " + b.AdminUser + " has every privilege rekey's statements need"}}, nil
	}
	var fs []engine.Finding
	for _, m := range missing {
		fs = append(fs, engine.Finding{Target: inst.Name, Check: "privileges",
			Message: fmt.Sprintf("the admin user %s lacks %s: %s", b.AdminUser, m.what, m.why), Fix: m.grant})
	}
	return fs, nil
}

// readRoleValues: whether the instance is read-only now.
func readRoleValues(ctx context.Context, conn *sql.Conn) (bool, error) {
	var ro, sro int
	if err := conn.QueryRowContext(ctx, "SELECT @@GLOBAL.read_only, @@GLOBAL.super_read_only").Scan(&ro, &sro); err != nil {
		return false, err
	}
	return ro == 1 || sro == 1, nil
}

// showGrants is SHOW GRANTS for the session's own account (its active
// roles' privileges included).
func showGrants(ctx context.Context, conn *sql.Conn) ([]string, error) {
	rows, err := conn.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// currentAccount is the admin's account as MySQL matched it, quoted for a
// GRANT: its host is taken from the server only when it has the shape of
// a host pattern, else the admin is named with '%'.
func currentAccount(ctx context.Context, conn *sql.Conn, user string) (string, error) {
	var cu string
	if err := conn.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&cu); err != nil {
		return "", err
	}
	host := "%"
	if i := strings.LastIndex(cu, "@"); i >= 0 && cu[:i] == user && hostPattern.MatchString(cu[i+1:]) {
		host = cu[i+1:]
	}
	return quote(user) + "@" + quote(host), nil
}
