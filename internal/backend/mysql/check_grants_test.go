package mysql

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// fullAdmin is SHOW GRANTS (MySQL 9.7) of an account granted ALL
// PRIVILEGES ON *.* WITH GRANT OPTION: static privileges spelled out.
var fullAdmin = []string{
	"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, RELOAD, SHUTDOWN, PROCESS, FILE, REFERENCES, INDEX, ALTER, SHOW DATABASES, SUPER, CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, REPLICATION SLAVE, REPLICATION CLIENT, CREATE VIEW, SHOW VIEW, CREATE ROUTINE, ALTER ROUTINE, CREATE USER, EVENT, TRIGGER, CREATE TABLESPACE, CREATE ROLE, DROP ROLE ON *.* TO `adm`@`%` WITH GRANT OPTION",
	"GRANT APPLICATION_PASSWORD_ADMIN,BACKUP_ADMIN,SYSTEM_VARIABLES_ADMIN ON *.* TO `adm`@`%` WITH GRANT OPTION",
}

func TestMissingPrivileges(t *testing.T) {
	app := User{Name: "app", Host: "%", Grants: []v1.MySQLGrant{{Privileges: []string{"SELECT", "INSERT"}, Object: "shop.*"}}}
	for _, tc := range []struct {
		name string
		in   privilegeInput
		want []string // the GRANT statements, in order
	}{
		{"everything", privilegeInput{grants: parseGrants(fullAdmin), readOnly: true, create: []User{app}}, nil},
		{"the minimal admin", privilegeInput{grants: parseGrants([]string{
			"GRANT REPLICATION CLIENT, CREATE USER ON *.* TO `adm`@`%`",
			"GRANT CONNECTION_ADMIN,SYSTEM_VARIABLES_ADMIN ON *.* TO `adm`@`%`",
			"GRANT SELECT ON `mysql`.`user` TO `adm`@`%`",
			"GRANT `r1`@`%` TO `adm`@`%`",
		}), readOnly: true}, nil},
		{"probes denied", privilegeInput{probes: privilegeProbes{mysqlUser: true, cloneStatus: true, replStatus: true, sessionLogBn: true},
			grants: parseGrants([]string{"GRANT CREATE USER ON *.* TO `adm`@`%`"})}, []string{
			"GRANT SELECT ON mysql.user TO 'adm'@'%'",
			"GRANT SELECT ON performance_schema.* TO 'adm'@'%'",
			"GRANT REPLICATION CLIENT ON *.* TO 'adm'@'%'",
			"GRANT SYSTEM_VARIABLES_ADMIN ON *.* TO 'adm'@'%'",
		}},
		{"no CREATE USER", privilegeInput{grants: parseGrants([]string{"GRANT SELECT ON *.* TO `adm`@`%`"})}, []string{"GRANT CREATE USER ON *.* TO 'adm'@'%'"}},
		{"CREATE USER on a database is not global", privilegeInput{grants: parseGrants([]string{"GRANT ALL PRIVILEGES ON `shop`.* TO `adm`@`%`"})}, []string{"GRANT CREATE USER ON *.* TO 'adm'@'%'"}},
		{"read-only instance without SYSTEM_VARIABLES_ADMIN", privilegeInput{readOnly: true, grants: parseGrants([]string{"GRANT CREATE USER, SESSION_VARIABLES_ADMIN, CONNECTION_ADMIN ON *.* TO `adm`@`%`"})},
			[]string{"GRANT SYSTEM_VARIABLES_ADMIN ON *.* TO 'adm'@'%'"}},
		{"read-only instance without CONNECTION_ADMIN", privilegeInput{readOnly: true, grants: parseGrants([]string{"GRANT CREATE USER, SYSTEM_VARIABLES_ADMIN ON *.* TO `adm`@`%`"})},
			[]string{"GRANT CONNECTION_ADMIN ON *.* TO 'adm'@'%'"}},
		{"a writable instance needs neither", privilegeInput{grants: parseGrants([]string{"GRANT CREATE USER ON *.* TO `adm`@`%`"})}, nil},
		{"SUPER lifts super_read_only too", privilegeInput{readOnly: true, grants: parseGrants([]string{"GRANT SUPER, CREATE USER ON *.* TO `adm`@`%`"})}, nil},
		{"a user to create needs grantable privileges", privilegeInput{create: []User{app}, grants: parseGrants([]string{
			"GRANT CREATE USER ON *.* TO `adm`@`%`", "GRANT SELECT ON `shop`.* TO `adm`@`%` WITH GRANT OPTION", "GRANT INSERT ON `shop`.* TO `adm`@`%`"})},
			[]string{"GRANT INSERT ON `shop`.* TO 'adm'@'%' WITH GRANT OPTION"}},
		{"a user that exists needs nothing granted", privilegeInput{grants: parseGrants([]string{"GRANT CREATE USER ON *.* TO `adm`@`%`"})}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.account = "'adm'@'%'"
			var got []string
			for _, m := range missingPrivileges(tc.in) {
				got = append(got, m.grant)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
