package testenv

import (
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// MySQLCluster is a primary and its replicas with GTID replication, plus a
// downstream instance replicating from the primary as a different cluster's
// intermediate primary would: what proves that no credential change
// leaves the cluster by replication.
type MySQLCluster struct {
	Primary    *MySQLInstance
	Replicas   []*MySQLInstance
	Downstream *MySQLInstance
}

// Instances are the members of the cluster the operator manages, primary first.
func (c *MySQLCluster) Instances() []*MySQLInstance {
	return append([]*MySQLInstance{c.Primary}, c.Replicas...)
}

// Addrs are the members' host:port, primary first.
func (c *MySQLCluster) Addrs() []string {
	var out []string
	for _, i := range c.Instances() {
		out = append(out, i.Addr())
	}
	return out
}

// Stop stops every instance of the cluster and removes their data.
func (c *MySQLCluster) Stop() {
	var wg sync.WaitGroup
	for _, i := range append(c.Instances(), c.Downstream) {
		if i == nil {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); i.Destroy() }()
	}
	wg.Wait()
}

// MySQLOptions shape a cluster.
type MySQLOptions struct {
	Replicas   int  // replicas besides the primary; default 2
	NoReplicas bool // a lone primary (Replicas is ignored)
	Downstream bool // also start the downstream instance
}

// StartMySQLCluster starts a primary, its replicas and (optionally) the
// downstream instance, and wires GTID replication between them.
func (e *Env) StartMySQLCluster(opts MySQLOptions) (c *MySQLCluster, err error) {
	switch {
	case opts.NoReplicas:
		opts.Replicas = 0
	case opts.Replicas == 0:
		opts.Replicas = 2
	}
	c = &MySQLCluster{}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.Primary, err = e.newMySQLInstance("primary", RolePrimary); err != nil {
		return c, err
	}
	for n := range opts.Replicas {
		r, err := e.newMySQLInstance(fmt.Sprintf("replica%d", n+1), RoleReplica)
		if err != nil {
			return c, err
		}
		c.Replicas = append(c.Replicas, r)
	}
	if opts.Downstream {
		if c.Downstream, err = e.newMySQLInstance("downstream", RoleDownstream); err != nil {
			return c, err
		}
	}
	all := append(c.Instances(), c.Downstream)
	errs := make(chan error, len(all))
	for _, i := range all {
		if i == nil {
			errs <- nil
			continue
		}
		go func() { errs <- i.Start() }()
	}
	for range all {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return c, err
	}
	for _, r := range append(c.Replicas, c.Downstream) {
		if r == nil {
			continue
		}
		if err := r.ReplicateFrom(c.Primary); err != nil {
			return c, err
		}
	}
	return c, nil
}

// ReplicateFrom points the instance at source with GTID auto-positioning and
// starts replication.
func (i *MySQLInstance) ReplicateFrom(source *MySQLInstance) error {
	if err := i.Exec(
		"STOP REPLICA",
		fmt.Sprintf("CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT=%d, "+
			"SOURCE_USER='%s', SOURCE_PASSWORD='%s', SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1",
			source.Port, replUser, replPassword),
		"START REPLICA",
	); err != nil {
		return err
	}
	uuid, err := source.QueryString("SELECT @@GLOBAL.server_uuid")
	if err != nil {
		return err
	}
	// Connected means both threads running and the source identified: the
	// IO thread reports Yes a moment before Source_UUID is filled in, and a
	// health check in between sees a replica of an unknown server. The
	// deadline is a hang guard (at load 40 a reconnect takes seconds).
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		st, err := i.ReplicaStatus()
		if err == nil && st["Replica_IO_Running"] == "Yes" && st["Replica_SQL_Running"] == "Yes" && st["Source_UUID"] == uuid {
			return nil
		}
		if err == nil && st["Last_IO_Error"] != "" {
			return fmt.Errorf("%s: replication from %s: %s", i.Name, source.Name, st["Last_IO_Error"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: replication from %s did not connect", i.Name, source.Name)
}

// ReplicaStatus is SHOW REPLICA STATUS as column → value; empty when the
// instance replicates from nobody.
func (i *MySQLInstance) ReplicaStatus() (map[string]string, error) {
	db, err := i.DB()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.Query("SHOW REPLICA STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if !rows.Next() {
		return out, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for n := range vals {
		ptrs[n] = &vals[n]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	for n, c := range cols {
		out[c] = vals[n].String
	}
	return out, nil
}

// WaitCaughtUp waits until the instance has applied every transaction the
// source has executed.
func (i *MySQLInstance) WaitCaughtUp(source *MySQLInstance) error {
	gtids, err := source.QueryString("SELECT @@GLOBAL.gtid_executed")
	if err != nil {
		return err
	}
	_, err = i.QueryString("SELECT WAIT_FOR_EXECUTED_GTID_SET(?, 30)", gtids)
	if err != nil {
		return err
	}
	ok, err := i.QueryString("SELECT GTID_SUBSET(?, @@GLOBAL.gtid_executed)", gtids)
	if err != nil {
		return err
	}
	if ok != "1" {
		return fmt.Errorf("%s did not catch up with %s", i.Name, source.Name)
	}
	return nil
}

// Switchover moves the primary role from oldPrimary to newPrimary as an
// orchestrator (MOCO's clustering loop) does it on mysqld: the old primary
// turns read-only, the new one stops replicating and turns writable, and
// oldPrimary and others replicate from it.
func Switchover(oldPrimary, newPrimary *MySQLInstance, others ...*MySQLInstance) error {
	if err := oldPrimary.Exec("SET GLOBAL super_read_only=ON"); err != nil {
		return err
	}
	if err := newPrimary.Exec("STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL super_read_only=OFF", "SET GLOBAL read_only=OFF"); err != nil {
		return err
	}
	for _, r := range append([]*MySQLInstance{oldPrimary}, others...) {
		if err := r.ReplicateFrom(newPrimary); err != nil {
			return err
		}
	}
	return nil
}
