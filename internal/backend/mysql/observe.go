package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	driver "github.com/go-sql-driver/mysql"
)

// observation is what one instance says of itself.
type observation struct {
	Name          string
	ServerUUID    string
	ReadOnly      bool
	SuperReadOnly bool
	Channels      []channel
	// Clone is performance_schema.clone_status.STATE ("" without the
	// clone plugin, which is then not cloning).
	Clone string
	// GTIDExecuted is @@GLOBAL.gtid_executed ("" with GTIDs off, which
	// leaves errant transactions unseen: errant.go).
	GTIDExecuted string
}

// channel is one row of SHOW REPLICA STATUS.
type channel struct {
	Name       string // "" is the default channel
	Source     string // host:port, for messages
	SourceUser string // the account the replica logs in to its source as
	SourceUUID string // empty until the IO thread first connected
	IORunning  string // Yes, No or Connecting
	SQLRunning string // Yes or No
	IOErrno    string
	IOError    string
	SQLErrno   string
	SQLError   string
}

// role is the part of an observation that says which role an instance
// plays now: what a session re-reads before it restores super_read_only.
type role struct {
	readOnly, superReadOnly bool
	replica                 bool // has a replication channel (stopped or not)
}

func (o observation) role() role {
	return role{readOnly: o.ReadOnly, superReadOnly: o.SuperReadOnly, replica: len(o.Channels) > 0}
}

// cloneInProgress is clone_status's state while a CLONE runs.
const cloneInProgress = "In Progress"

// querier is what observe needs of a connection.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readRole reads read_only, super_read_only and whether a replication
// channel is configured.
func readRole(ctx context.Context, q querier) (role, error) {
	var ro, sro int
	if err := q.QueryRowContext(ctx, "SELECT @@GLOBAL.read_only, @@GLOBAL.super_read_only").Scan(&ro, &sro); err != nil {
		return role{}, fmt.Errorf("read read_only: %w", err)
	}
	chans, err := replicaStatus(ctx, q)
	if err != nil {
		return role{}, err
	}
	return role{readOnly: ro == 1, superReadOnly: sro == 1, replica: len(chans) > 0}, nil
}

// observe reads everything the health gate judges on one instance.
func observe(ctx context.Context, name string, q querier) (observation, error) {
	o := observation{Name: name}
	var ro, sro int
	if err := q.QueryRowContext(ctx, "SELECT @@GLOBAL.server_uuid, @@GLOBAL.read_only, @@GLOBAL.super_read_only, @@GLOBAL.gtid_executed").Scan(&o.ServerUUID, &ro, &sro, &o.GTIDExecuted); err != nil {
		return o, fmt.Errorf("read server_uuid, read_only and gtid_executed: %w", err)
	}
	o.ReadOnly, o.SuperReadOnly = ro == 1, sro == 1
	var err error
	if o.Channels, err = replicaStatus(ctx, q); err != nil {
		return o, err
	}
	var state sql.NullString
	switch err := q.QueryRowContext(ctx, "SELECT STATE FROM performance_schema.clone_status ORDER BY ID DESC LIMIT 1").Scan(&state); {
	case err == nil:
		o.Clone = state.String
	case errors.Is(err, sql.ErrNoRows), mysqlErrno(err) == 1146:
		// No clone ever ran, or the clone plugin is not installed (the
		// table does not exist): nothing is being cloned.
	default:
		return o, fmt.Errorf("read performance_schema.clone_status: %w", err)
	}
	return o, nil
}

// replicaStatus is SHOW REPLICA STATUS, one channel per row; none on an
// instance that replicates from nobody. MySQL before 8.0.22 knows only
// SHOW SLAVE STATUS (and its Master_/Slave_ column names); 8.4 only the
// former.
func replicaStatus(ctx context.Context, q querier) ([]channel, error) {
	rows, err := q.QueryContext(ctx, "SHOW REPLICA STATUS")
	if mysqlErrno(err) == 1064 {
		rows, err = q.QueryContext(ctx, "SHOW SLAVE STATUS")
	}
	if err != nil {
		if mysqlErrno(err) == 1227 {
			return nil, fmt.Errorf("read replication status (SHOW REPLICA STATUS): the admin user needs the REPLICATION CLIENT privilege: %w", err)
		}
		return nil, fmt.Errorf("read replication status (SHOW REPLICA STATUS): %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []channel
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		col := func(names ...string) string {
			for _, n := range names {
				if v, ok := row[n]; ok {
					return v
				}
			}
			return ""
		}
		out = append(out, channel{
			Name:       col("Channel_Name"),
			Source:     col("Source_Host", "Master_Host") + ":" + col("Source_Port", "Master_Port"),
			SourceUUID: col("Source_UUID", "Master_UUID"),
			SourceUser: col("Source_User", "Master_User"),
			IORunning:  col("Replica_IO_Running", "Slave_IO_Running"),
			SQLRunning: col("Replica_SQL_Running", "Slave_SQL_Running"),
			IOErrno:    col("Last_IO_Errno"),
			IOError:    col("Last_IO_Error"),
			SQLErrno:   col("Last_SQL_Errno"),
			SQLError:   col("Last_SQL_Error"),
		})
	}
	return out, rows.Err()
}

func mysqlErrno(err error) uint16 {
	var me *driver.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}
