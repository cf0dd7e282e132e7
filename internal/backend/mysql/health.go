package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	driver "github.com/go-sql-driver/mysql"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// The health gate: a phase that changes users on every instance
// does not start while the cluster is not healthy. Reachability alone is
// not enough: a replica whose replication stopped, one that is being
// CLONEd, or one that replicates from somewhere other than the primary may
// be rebuilt, re-cloned or re-pointed by the cluster manager in the middle
// of the phase, and comes back with mysql.user rows from another moment.
// rekey waits instead; the controller turns the refusal into a Warning
// Event and the Degraded condition and asks again, so the phase starts by
// itself once the cluster is healthy.
//
// Observing is separate from deciding: observe reads what one instance
// says of itself, decideHealth (pure, table-tested) judges the set.

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
}

// channel is one row of SHOW REPLICA STATUS.
type channel struct {
	Name       string // "" is the default channel
	Source     string // host:port, for messages
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
	if err := q.QueryRowContext(ctx, "SELECT @@GLOBAL.server_uuid, @@GLOBAL.read_only, @@GLOBAL.super_read_only").Scan(&o.ServerUUID, &ro, &sro); err != nil {
		return o, fmt.Errorf("read server_uuid and read_only: %w", err)
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

// decideHealth judges a set of instances, all of which answered: nil when
// a phase may start, else the refusal naming every problem found. phase is
// what would start ("the rotation", "the discard").
//
// Healthy means: no CLONE in progress; every replication channel has both
// threads running; exactly one primary — the one writable instance, or,
// when none is writable (an intermediate primary replicating from outside
// the set, a primary the cluster manager has not made writable yet), the
// one instance that replicates from no other member; and every other
// instance replicates directly from that primary.
func decideHealth(phase string, obs []observation) *engine.Refusal {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	byUUID := map[string]string{}
	for _, o := range obs {
		if other, dup := byUUID[o.ServerUUID]; dup && o.ServerUUID != "" {
			add("%s and %s are the same server (server_uuid %s): list each instance once", other, o.Name, o.ServerUUID)
		}
		byUUID[o.ServerUUID] = o.Name
	}
	broken := map[string]bool{} // instances whose replication is already reported
	for _, o := range obs {
		if o.Clone == cloneInProgress {
			add("a CLONE is in progress on %s", o.Name)
			broken[o.Name] = true
		}
		for _, c := range o.Channels {
			if p := threadProblem(c); p != "" {
				add("on %s, %s", o.Name, p)
				broken[o.Name] = true
			}
		}
	}
	if len(obs) > 1 {
		problems = append(problems, topologyProblems(obs, byUUID, broken)...)
	}
	if len(problems) == 0 {
		return nil
	}
	return &engine.Refusal{Reason: string(reason.ClusterUnhealthy), Message: fmt.Sprintf(
		"%s does not start while the cluster is unhealthy: %s. Nothing was changed. rekey checks again by itself and starts once every replica replicates from the primary with both replication threads running and no clone is in progress: fix what is named here (e.g. START REPLICA on a stopped replica) or let the cluster manager do it; nothing needs to be done on rekey's side",
		phase, strings.Join(problems, "; "))}
}

// threadProblem describes a channel whose IO or SQL thread is not running.
func threadProblem(c channel) string {
	name := "replication"
	if c.Name != "" {
		name = "replication channel " + c.Name
	}
	var p []string
	if c.IORunning != "Yes" {
		p = append(p, "IO thread is "+threadState(c.IORunning)+lastError(c.IOErrno, c.IOError))
	}
	if c.SQLRunning != "Yes" {
		p = append(p, "SQL thread is "+threadState(c.SQLRunning)+lastError(c.SQLErrno, c.SQLError))
	}
	if len(p) == 0 {
		return ""
	}
	return fmt.Sprintf("%s from %s: %s", name, c.Source, strings.Join(p, ", "))
}

func threadState(s string) string {
	switch s {
	case "No", "":
		return "stopped"
	case "Connecting":
		return "still connecting"
	}
	return strings.ToLower(s)
}

// lastError quotes MySQL's last replication error, cut before any
// statement text: an applier error may quote the failing statement
// ("Query: '...'"), which can carry another application's credentials.
func lastError(errno, msg string) string {
	if errno == "" || errno == "0" {
		return ""
	}
	if i := strings.Index(msg, "Query:"); i >= 0 {
		msg = strings.TrimSpace(msg[:i]) + " [statement omitted]"
	}
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return fmt.Sprintf(" (error %s: %s)", errno, msg)
}

// topologyProblems finds the primary and checks that every other instance
// replicates from it. Instances whose replication is already reported
// broken are not reported twice.
func topologyProblems(obs []observation, byUUID map[string]string, broken map[string]bool) []string {
	var writable, roots []observation
	for _, o := range obs {
		if !o.ReadOnly {
			writable = append(writable, o)
		}
		if !replicatesFromMember(o, byUUID) {
			roots = append(roots, o)
		}
	}
	var primary observation
	switch {
	case len(writable) > 1:
		return []string{fmt.Sprintf("%s are all writable (read_only=OFF): only the primary may be", names(writable))}
	case len(writable) == 1:
		primary = writable[0]
	case len(roots) == 1:
		primary = roots[0]
	default:
		return []string{fmt.Sprintf("no instance is the primary: none is writable and %s replicate from no other instance of the set", names(roots))}
	}
	var out []string
	for _, c := range primary.Channels {
		if n, ok := byUUID[c.SourceUUID]; ok && c.SourceUUID != "" {
			out = append(out, fmt.Sprintf("the primary %s replicates from %s", primary.Name, n))
		}
	}
	for _, o := range obs {
		if o.Name == primary.Name || broken[o.Name] {
			continue
		}
		if replicatesFrom(o, primary.ServerUUID) {
			continue
		}
		switch {
		case len(o.Channels) == 0:
			out = append(out, fmt.Sprintf("%s is not a replica of the primary %s (it replicates from nothing)", o.Name, primary.Name))
		default:
			var from []string
			for _, c := range o.Channels {
				if n, ok := byUUID[c.SourceUUID]; ok {
					from = append(from, n)
				} else {
					from = append(from, c.Source+" (not an instance of this set)")
				}
			}
			out = append(out, fmt.Sprintf("%s replicates from %s, not from the primary %s", o.Name, strings.Join(from, ", "), primary.Name))
		}
	}
	return out
}

func replicatesFrom(o observation, uuid string) bool {
	for _, c := range o.Channels {
		if c.SourceUUID != "" && c.SourceUUID == uuid {
			return true
		}
	}
	return false
}

func replicatesFromMember(o observation, byUUID map[string]string) bool {
	for _, c := range o.Channels {
		if n, ok := byUUID[c.SourceUUID]; ok && c.SourceUUID != "" && n != o.Name {
			return true
		}
	}
	return false
}

func names(obs []observation) string {
	var n []string
	for _, o := range obs {
		n = append(n, o.Name)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// healthGate observes every instance over a session that changes nothing
// (super_read_only stays as it is) and refuses when decideHealth does. An
// instance that does not answer is reported as unreachable, as every
// phase does.
func (b *Backend) healthGate(ctx context.Context, phase string, passwords []string, secrets engine.Secrets) error {
	obs, err := b.observeAll(ctx, "health/instance-observed", passwords, secrets, nil)
	if err != nil {
		return err
	}
	if rf := decideHealth(phase, obs); rf != nil {
		return redactRefusal(rf, passwords, secrets)
	}
	if b.Gate != nil {
		return b.Gate(ctx, phase == discardPhase)
	}
	return nil
}

var _ engine.DiscardGate = (*Backend)(nil)

// CheckDiscardHealth is the discard's health gate on its own (Retire runs
// it too), for a caller that records that a discard started — after which
// the rotation can only complete — and so must not record it while the
// cluster is unhealthy: until then, the rotation may still be rolled back.
func (b *Backend) CheckDiscardHealth(ctx context.Context, cur, pending engine.Secrets) error {
	return b.healthGate(ctx, discardPhase, b.adminPasswords(pending, cur), merge(cur, pending))
}

// What the health gate's refusals say does not start.
const (
	rotationPhase = "the rotation"
	discardPhase  = "the discard of the old passwords"
)

// observeAll observes every instance in a read-only session; then, if fn
// is set, runs it in the same session.
func (b *Backend) observeAll(ctx context.Context, step string, passwords []string, secrets engine.Secrets, fn func(*session) error) ([]observation, error) {
	var (
		mu  sync.Mutex
		obs []observation
	)
	err := b.forEachInstance(ctx, step, false, passwords, secrets, func(s *session) error {
		o, err := observe(ctx, s.inst.Name, s.conn)
		if err != nil {
			return s.wrap("observe", err)
		}
		mu.Lock()
		obs = append(obs, o)
		mu.Unlock()
		if fn != nil {
			return fn(s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Instances in the spec's order, whatever order they answered in: the
	// message names them the same way every time.
	order := map[string]int{}
	for i, inst := range b.Instances {
		order[inst.Name] = i
	}
	sort.Slice(obs, func(i, j int) bool { return order[obs[i].Name] < order[obs[j].Name] })
	return obs, nil
}

// redactRefusal keeps secrets out of a refusal that quotes MySQL (its last
// replication errors): rekey's own statements never reach a binary log,
// but nothing is left to that.
func redactRefusal(rf *engine.Refusal, passwords []string, secrets engine.Secrets) *engine.Refusal {
	if err := redact(errors.New(rf.Message), slices.Concat(passwords, values(secrets))...); err != nil {
		rf.Message = err.Error()
	}
	return rf
}
