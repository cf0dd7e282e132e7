package testenv

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// A cluster manager's steps on the primary and replica, for tests of a
// failover: the primary crashes, the replica is promoted, the old primary
// comes back as the new one's replica.

// Kill crashes instance i: its postmaster and every backend get SIGKILL,
// as a node that dies does; nothing is flushed or shut down.
func (p *Postgres) Kill(i *PostgresInstance) error {
	if i.cmd == nil || i.Exited() {
		return nil
	}
	if err := syscall.Kill(-i.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill postgres %s: %w", i.Name, err)
	}
	select {
	case <-i.done:
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("postgres %s did not end a minute after SIGKILL", i.Name)
	}
}

// Promote promotes replica i (pg_promote, which waits until it is out of
// recovery).
func (p *Postgres) Promote(i *PostgresInstance) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := p.Admin(ctx, i)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	var ok bool
	if err := c.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok); err != nil || !ok {
		return fmt.Errorf("promote postgres %s: %v (promoted: %v)", i.Name, err, ok)
	}
	return nil
}

// Rejoin makes the stopped instance i a streaming replica of from, as a
// cluster manager rebuilds a failed primary: its data directory is
// removed and cloned from from (pg_basebackup -R), and it is started.
func (p *Postgres) Rejoin(i, from *PostgresInstance) error {
	if !i.Exited() {
		return fmt.Errorf("postgres %s is running: Kill it first", i.Name)
	}
	if err := os.RemoveAll(i.Data); err != nil {
		return err
	}
	if err := p.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(from.Port), "-U", p.AdminUser,
		"-D", i.Data, "-R", "-X", "stream", "--no-sync", "-c", "fast"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return p.startInstance(ctx, i, p.pki)
}

// WaitReplayed waits until the replica has replayed the primary's WAL up
// to now (a minute at most): what the primary committed is then visible
// there. Replication is asynchronous, so a check of the replica right
// after a change on the primary (a manager killed before it waited for
// the replay itself) must wait for this first.
func (p *Postgres) WaitReplayed() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pc, err := p.Admin(ctx, p.Primary)
	if err != nil {
		return err
	}
	defer pc.Close(ctx)
	var lsn string
	if err := pc.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return err
	}
	rc, err := p.Admin(ctx, p.Replica)
	if err != nil {
		return err
	}
	defer rc.Close(ctx)
	for {
		var done bool
		if err := rc.QueryRow(ctx, "SELECT COALESCE(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the replica has not replayed the primary's WAL up to %s in a minute", lsn)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
