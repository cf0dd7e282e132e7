package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// errPortTaken: mysqld exited because another socket held its port.
var errPortTaken = errors.New("mysqld's port is taken")

const (
	// A hang guard: under load mysqld took over a minute to listen. A
	// restart waits this long in all for its port to come free.
	mysqlListenGuard = 3 * time.Minute
	// A first start tries this many ports: each pick is verified free, so
	// a second loss of the race is already unlikely.
	firstStartPorts = 5
)

// Start starts mysqld on its data directory and waits until it answers.
//
// Should another socket take the port before mysqld binds it, a first
// start moves to another port: nothing names this one yet. A restart
// keeps its port, which replicas and Kubernetes objects name, and starts
// again once the port is free (a connection whose local port it is frees
// it when it closes).
func (i *MySQLInstance) Start() error {
	if i.proc != nil && !i.proc.Exited() {
		return nil
	}
	deadline := time.Now().Add(mysqlListenGuard)
	for attempt := 1; ; attempt++ {
		err := i.startOnce()
		if err == nil {
			i.started = true
			return nil
		}
		if !errors.Is(err, errPortTaken) {
			return err
		}
		if !i.started {
			if attempt == firstStartPorts {
				return err
			}
			port, perr := FreePort()
			if perr != nil {
				return errors.Join(err, perr)
			}
			i.Port = port
			continue
		}
		if !waitPortFree(i.Port, deadline) || time.Now().After(deadline) {
			return fmt.Errorf("%w, still after %s", err, mysqlListenGuard)
		}
	}
}

func (i *MySQLInstance) startOnce() error {
	args := []string{
		"--no-defaults", "--user=root",
		"--datadir=" + i.dir + "/data",
		"--socket=" + i.dir + "/mysqld.sock",
		"--pid-file=" + i.dir + "/mysqld.pid",
		"--log-error=" + i.dir + "/error.log",
		fmt.Sprintf("--port=%d", i.Port), "--bind-address=127.0.0.1",
		"--mysqlx=OFF", "--secure-file-priv=", "--skip-name-resolve",
		fmt.Sprintf("--server-id=%d", i.serverID),
		"--gtid-mode=ON", "--enforce-gtid-consistency=ON",
		"--log-bin=binlog", "--log-replica-updates=ON", "--skip-replica-start=ON",
		"--innodb-buffer-pool-size=32M", "--innodb-redo-log-capacity=8M",
		"--performance-schema=OFF", "--max-connections=500",
		// No test or rekey uses MySQL events; the event scheduler's thread
		// spun in Event_queue::lock_data (a third of mysqld's CPU in a
		// perf profile of start and stop): a 4-instance cluster's start and
		// stop took 10.3 CPU-s with it, 2.7 without.
		"--event-scheduler=OFF",
	}
	if i.Role != RolePrimary || i.Managed {
		// As MOCO starts every mysqld: read-only until told otherwise.
		args = append(args, "--super-read-only=ON")
	}
	tlsArgs, err := i.writeTLSFiles()
	if err != nil {
		return err
	}
	args = append(args, tlsArgs...)
	errorLog := i.errorLogPath()
	var logStart int64 // only this start's lines say why it failed
	if st, err := os.Stat(errorLog); err == nil {
		logStart = st.Size()
	}
	p, err := startProcess(procSpec{
		name: "mysqld " + i.Name, path: "/usr/sbin/mysqld", args: args,
		env: []string{"PATH=/usr/sbin:/usr/bin:/bin", "TZ=UTC"}, root: i.env.SidDir,
		logOut: filepath.Join(i.env.SidDir, i.dir, "stdout.log"),
	})
	if err != nil {
		return err
	}
	i.proc = p
	if err := waitTCP(p, i.Port, mysqlListenGuard); err != nil {
		if errors.Is(err, errExitedBeforeListening) && logSince(errorLog, logStart, "Address already in use") {
			return fmt.Errorf("%w: port %d (error log: %s)", errPortTaken, i.Port, errorLog)
		}
		return fmt.Errorf("%w (error log: %s)", err, errorLog)
	}
	// A hang guard, not a deadline: at load ~57 a mysqld listening for a
	// minute already still closed every login for two more (an e2e run
	// failed on "harness login: invalid connection"); a mysqld that exited
	// fails at once (waitLogin).
	if err := i.waitLogin(10 * time.Minute); err != nil {
		return err
	}
	if i.Managed {
		return nil
	}
	return i.resumeReplication()
}

// errorLogPath is mysqld's error log on the host.
func (i *MySQLInstance) errorLogPath() string {
	return filepath.Join(i.env.SidDir, i.dir, "error.log")
}

// logSince: the file holds s after offset.
func logSince(path string, offset int64, s string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return false
	}
	b, err := io.ReadAll(f)
	return err == nil && strings.Contains(string(b), s)
}

// waitPortFree waits until a listen on the port as mysqld binds it
// succeeds, or the deadline passes.
func waitPortFree(port int, deadline time.Time) bool {
	for {
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			l.Close()
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// resumeReplication restarts the replication a restarted replica had, as a
// cluster manager does when the pod comes back (mysqld runs with
// --skip-replica-start, as MOCO's does, so that nothing replicates before
// the manager has looked): without it, a restarted replica would stay
// stopped and a health-gated operator would rightly wait forever. It waits
// until both threads run or the IO thread reports an error (the source
// may be down on purpose), at most 10 s, and never fails Start for that.
func (i *MySQLInstance) resumeReplication() error {
	st, err := i.ReplicaStatus()
	if err != nil || len(st) == 0 {
		return err // no channel: a primary, or a new data directory
	}
	if err := i.Exec("START REPLICA"); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		st, err := i.ReplicaStatus()
		if err != nil || st["Last_IO_Error"] != "" ||
			st["Replica_IO_Running"] == "Yes" && st["Replica_SQL_Running"] == "Yes" {
			break
		}
	}
	return nil
}

func (i *MySQLInstance) waitLogin(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = i.CanLogin(EnvUser, EnvPassword); err == nil {
			return nil
		}
		if i.proc != nil && i.proc.Exited() {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("mysqld %s: harness login: %w (error log: %s)", i.Name, err, i.errorLogPath())
}
