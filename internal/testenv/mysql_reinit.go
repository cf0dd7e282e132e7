package testenv

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ReinitOptions say how Reinit rebuilds an instance.
type ReinitOptions struct {
	// Clone fills the new data directory with CLONE INSTANCE FROM the
	// source, as MOCO rebuilds a replica: the instance then holds the
	// source's mysql.user rows (secondary passwords included) and its GTID
	// set. Otherwise it starts empty and replays the source's binary logs
	// from an empty GTID set — which never contain what was run with
	// sql_log_bin=0, such as rekey's credential DDL.
	Clone bool
	// Bootstrap statements go into the new data directory's init file,
	// after the harness accounts: what a cluster manager creates on a new
	// instance before it serves (e.g. its own admin account). They are
	// never binlogged. Not allowed with Clone, which overwrites them.
	Bootstrap []string
}

// Reinit re-initialises a replica as a cluster manager rebuilds a lost
// one: mysqld stops, its data directory is wiped, `mysqld
// --initialize-insecure` creates a new one holding only the harness
// accounts (and opts.Bootstrap), mysqld starts again on the same port with
// super_read_only=ON, and replicates from source with GTID auto-position.
// It returns once the instance has caught up with source.
func (i *MySQLInstance) Reinit(source *MySQLInstance, opts ReinitOptions) error {
	if i.Role == RolePrimary {
		return fmt.Errorf("%s is the primary: re-initialise a replica", i.Name)
	}
	if opts.Clone && len(opts.Bootstrap) > 0 {
		return errors.New("Reinit: Bootstrap statements would be overwritten by the clone")
	}
	i.Stop()
	host := filepath.Join(i.env.SidDir, i.dir)
	for _, p := range []string{"data", "data.init.sql", "data.init.log"} {
		if err := os.RemoveAll(filepath.Join(host, p)); err != nil {
			return err
		}
	}
	if opts.Clone {
		// The clone replaces whatever the recipient holds: a copy of the
		// template (itself made by --initialize-insecure) starts sooner.
		if err := i.env.copyTemplate(filepath.Join(host, "data")); err != nil {
			return err
		}
	} else {
		initSQL := envAccountsSQL
		for _, s := range opts.Bootstrap {
			initSQL += strings.TrimSuffix(strings.TrimSpace(s), ";") + ";\n"
		}
		if err := i.env.initializeDatadir(i.dir+"/data", initSQL); err != nil {
			return fmt.Errorf("%s: %w", i.Name, err)
		}
	}
	if err := i.Start(); err != nil {
		return err
	}
	if gtids, err := i.QueryString("SELECT @@GLOBAL.gtid_executed"); err != nil || gtids != "" {
		return fmt.Errorf("%s: a fresh data directory has gtid_executed %q (%v), want empty", i.Name, gtids, err)
	}
	if opts.Clone {
		if err := i.cloneFrom(source); err != nil {
			return err
		}
	}
	if err := i.ReplicateFrom(source); err != nil {
		return err
	}
	return i.WaitCaughtUp(source)
}

// cloneFrom replaces the instance's data with source's (CLONE INSTANCE)
// and starts it again: without a supervising process, mysqld shuts down
// after a clone instead of restarting (error 3707).
func (i *MySQLInstance) cloneFrom(source *MySQLInstance) error {
	for _, inst := range []*MySQLInstance{source, i} {
		if err := inst.installClonePlugin(); err != nil {
			return err
		}
	}
	err := i.Exec(
		"SET GLOBAL super_read_only=OFF",
		fmt.Sprintf("SET GLOBAL clone_valid_donor_list='%s'", source.Addr()),
		fmt.Sprintf("CLONE INSTANCE FROM '%s'@'127.0.0.1':%d IDENTIFIED BY '%s'", EnvUser, source.Port, EnvPassword),
	)
	var me *mysql.MySQLError
	if err != nil && !(errors.As(err, &me) && me.Number == 3707) {
		return fmt.Errorf("clone %s from %s: %w", i.Name, source.Name, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !i.proc.Exited() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	i.Stop() // if it did not shut down by itself
	if err := i.Start(); err != nil {
		return fmt.Errorf("start %s after the clone: %w", i.Name, err)
	}
	mine, err := i.QueryString("SELECT @@GLOBAL.server_uuid")
	if err != nil {
		return err
	}
	if theirs, _ := source.QueryString("SELECT @@GLOBAL.server_uuid"); mine == theirs {
		return fmt.Errorf("%s has its donor's server_uuid after the clone", i.Name)
	}
	return nil
}

// installClonePlugin loads the clone plugin unless it is active, unlogged
// and with super_read_only lifted around it if the instance has it on.
func (i *MySQLInstance) installClonePlugin() error {
	st, err := i.QueryString("SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME='clone'")
	if err == nil && st == "ACTIVE" {
		return nil
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	sro, err := i.QueryString("SELECT @@GLOBAL.super_read_only")
	if err != nil {
		return err
	}
	stmts := []string{"SET SESSION sql_log_bin=0", "SET GLOBAL super_read_only=OFF", "INSTALL PLUGIN clone SONAME 'mysql_clone.so'"}
	if sro == "1" {
		stmts = append(stmts, "SET GLOBAL super_read_only=ON")
	}
	return i.Exec(stmts...)
}

// credentialDDL matches account and privilege statements as the binary
// log records them.
var credentialDDL = regexp.MustCompile(`(?i)\b((CREATE|ALTER|DROP|RENAME)\s+USER|GRANT|REVOKE|SET\s+PASSWORD)\b`)

// CredentialDDLInBinlog lists the account and privilege statements found in
// every binary log the instance has: what a replica or a downstream cluster
// would replay.
func (i *MySQLInstance) CredentialDDLInBinlog() ([]string, error) {
	db, err := i.DB()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var logs []string
	rows, err := db.Query("SHOW BINARY LOGS")
	if err != nil {
		return nil, err
	}
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for n := range vals {
			ptrs[n] = &vals[n]
		}
		if err := rows.Scan(ptrs...); err != nil {
			rows.Close()
			return nil, err
		}
		logs = append(logs, vals[0].String)
	}
	rows.Close()
	var found []string
	for _, l := range logs {
		events, err := db.Query("SHOW BINLOG EVENTS IN '" + strings.ReplaceAll(l, "'", "") + "'")
		if err != nil {
			return nil, err
		}
		cols, _ := events.Columns()
		for events.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for n := range vals {
				ptrs[n] = &vals[n]
			}
			if err := events.Scan(ptrs...); err != nil {
				events.Close()
				return nil, err
			}
			if info := vals[len(cols)-1].String; credentialDDL.MatchString(info) {
				found = append(found, l+": "+firstWords(info))
			}
		}
		events.Close()
	}
	return found, nil
}
