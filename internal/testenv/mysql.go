package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The environment's own superuser and replication user exist in every
// instance from the template on. They belong to the harness, never to the
// operator under test; the passwords are test-only constants.
const (
	EnvUser      = "rekey-env"
	EnvPassword  = "rekey-env-test-only"
	replUser     = "rekey-env-repl"
	replPassword = "rekey-env-repl-test-only"
)

// MySQL roles as the harness set them up. The operator must not trust them:
// it reads each instance's role live.
const (
	RolePrimary    = "primary"
	RoleReplica    = "replica"
	RoleDownstream = "downstream" // another cluster's intermediate primary
)

// MySQLInstance is one mysqld running in the sid chroot.
type MySQLInstance struct {
	Name string
	Port int
	Role string
	// Managed: a cluster manager (MOCO's clustering loop) owns the
	// instance's replication and read-only state, as MOCO owns its
	// mysqld. Start then starts it super_read_only whatever its role and
	// leaves its replication stopped (skip_replica_start) for the manager
	// to re-point. Set it before the instance restarts.
	Managed bool

	env      *Env
	dir      string // inside the chroot
	serverID int
	proc     *Process
	// started: a Start succeeded, so replicas and Kubernetes objects may
	// name the port, which must not change from then on.
	started bool
}

var templateMu sync.Mutex

// mysqlTemplate returns a data directory (inside the chroot) initialised
// once with the harness users; instances start from copies of it, which
// takes a fraction of the time --initialize does.
func (e *Env) mysqlTemplate() (string, error) {
	templateMu.Lock()
	defer templateMu.Unlock()
	version, err := e.MySQLVersion()
	if err != nil {
		return "", err
	}
	rel := "/var/lib/rekey-template-" + version
	host := filepath.Join(e.SidDir, rel)
	if _, err := os.Stat(filepath.Join(host, ".complete")); err == nil {
		return rel, nil
	}
	// Another test binary may be building the same template: take a lock.
	lock, err := os.OpenFile(host+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(host, ".complete")); err == nil {
		return rel, nil
	}
	os.RemoveAll(host)
	if err := e.initializeDatadir(rel, envAccountsSQL); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(host, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	return rel, nil
}

// envAccountsSQL creates the harness accounts in a new data directory.
var envAccountsSQL = fmt.Sprintf(`CREATE USER '%s'@'%%' IDENTIFIED BY '%s';
GRANT ALL PRIVILEGES ON *.* TO '%s'@'%%' WITH GRANT OPTION;
CREATE USER '%s'@'%%' IDENTIFIED BY '%s';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '%s'@'%%';
`, EnvUser, EnvPassword, EnvUser, replUser, replPassword, replUser)

// initializeDatadir runs mysqld --initialize-insecure on rel (a path inside
// the chroot, which must not exist yet) with initSQL as its init file.
// Nothing runs with binary logging or GTIDs on, so the new data directory
// has an empty gtid_executed.
func (e *Env) initializeDatadir(rel, initSQL string) error {
	host := filepath.Join(e.SidDir, rel)
	if err := os.WriteFile(host+".init.sql", []byte(initSQL), 0o644); err != nil {
		return err
	}
	out, err := exec.Command("chroot", e.SidDir, "/usr/sbin/mysqld", "--no-defaults",
		"--initialize-insecure", "--user=root", "--datadir="+rel, "--init-file="+rel+".init.sql",
		"--innodb-redo-log-capacity=8M", "--log-error="+rel+".init.log").CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(host + ".init.log")
		return fmt.Errorf("mysqld --initialize: %v: %s %s", err, out, log)
	}
	return nil
}

var (
	mysqlVersionOnce sync.Once
	mysqlVersion     string
	mysqlVersionErr  error
)

// MySQLVersion is the version of the chroot's mysqld, checked against the pin.
func (e *Env) MySQLVersion() (string, error) {
	mysqlVersionOnce.Do(func() {
		if err := e.requireFile(filepath.Join(e.SidDir, ".rekey-ready"), "the sid chroot"); err != nil {
			mysqlVersionErr = err
			return
		}
		out, err := exec.Command("chroot", e.SidDir, "/usr/sbin/mysqld", "--version").Output()
		if err != nil {
			mysqlVersionErr = fmt.Errorf("mysqld --version: %w", err)
			return
		}
		f := strings.Fields(string(out))
		for i, w := range f {
			if w == "Ver" && i+1 < len(f) {
				mysqlVersion = strings.SplitN(f[i+1], "-", 2)[0]
			}
		}
		if !strings.HasPrefix(mysqlVersion, e.Versions["MYSQL_SERIES"]) {
			mysqlVersionErr = fmt.Errorf("mysqld %q is not the pinned %s*: run `make env`", mysqlVersion, e.Versions["MYSQL_SERIES"])
		}
	})
	return mysqlVersion, mysqlVersionErr
}

var instanceSeq struct {
	sync.Mutex
	n int
}

func (e *Env) newMySQLInstance(name, role string) (*MySQLInstance, error) {
	instanceSeq.Lock()
	instanceSeq.n++
	seq := instanceSeq.n
	instanceSeq.Unlock()
	dir := fmt.Sprintf("/tmp/rekey-mysql-%d-%d-%s", os.Getpid(), seq, name)
	host := filepath.Join(e.SidDir, dir)
	os.RemoveAll(host)
	if err := os.MkdirAll(host, 0o755); err != nil {
		return nil, err
	}
	if err := e.copyTemplate(filepath.Join(host, "data")); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	return &MySQLInstance{Name: name, Role: role, Port: port, env: e, dir: dir,
		serverID: os.Getpid()%100000*100 + seq}, nil
}

// copyTemplate makes a new data directory (a host path) from the template.
func (e *Env) copyTemplate(dst string) error {
	tmpl, err := e.mysqlTemplate()
	if err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(e.SidDir, tmpl), dst).CombinedOutput(); err != nil {
		return fmt.Errorf("copy template: %v: %s", err, out)
	}
	// auto.cnf holds server_uuid; replication refuses equal UUIDs, so each
	// copy lets mysqld mint its own.
	if err := os.Remove(filepath.Join(dst, "auto.cnf")); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// Stop shuts mysqld down cleanly, keeping its data.
func (i *MySQLInstance) Stop() {
	if i.proc != nil {
		i.proc.Stop(30 * time.Second)
	}
}

// Kill ends mysqld at once, as a crash would, keeping its data.
func (i *MySQLInstance) Kill() {
	if i.proc != nil {
		i.proc.Kill()
	}
}

// Destroy stops mysqld and removes its data directory.
func (i *MySQLInstance) Destroy() {
	i.Stop()
	os.RemoveAll(filepath.Join(i.env.SidDir, i.dir))
}

// Addr is host:port of the instance.
func (i *MySQLInstance) Addr() string { return fmt.Sprintf("127.0.0.1:%d", i.Port) }

// DSN is a go-sql-driver DSN for user and password on this instance.
func (i *MySQLInstance) DSN(user, password string) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = user, password, "tcp", i.Addr()
	c.AllowNativePasswords = true
	// caching_sha2_password's full authentication needs TLS or RSA; the
	// harness verifies the test CA's certificate, as rekey does.
	// (Should the test CA have failed, the driver refuses the unknown
	// config name: never a silent fallback to an unverified connection.)
	harnessCA()
	c.TLSConfig = harnessTLS
	c.Timeout, c.ReadTimeout, c.WriteTimeout = 5*time.Second, 30*time.Second, 30*time.Second
	return c.FormatDSN()
}

// CanLogin opens a fresh connection as user and reports whether MySQL
// accepted the password.
func (i *MySQLInstance) CanLogin(user, password string) error {
	db, err := sql.Open("mysql", i.DSN(user, password))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// DB is a connection pool as the harness superuser; the caller closes it.
func (i *MySQLInstance) DB() (*sql.DB, error) {
	return sql.Open("mysql", i.DSN(EnvUser, EnvPassword))
}

// Exec runs statements as the harness superuser on one session.
func (i *MySQLInstance) Exec(stmts ...string) error {
	db, err := i.DB()
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s on %s: %w", firstWords(s), i.Name, err)
		}
	}
	return nil
}

// QueryString returns the first column of the first row of a query.
func (i *MySQLInstance) QueryString(q string, args ...any) (string, error) {
	db, err := i.DB()
	if err != nil {
		return "", err
	}
	defer db.Close()
	var s sql.NullString
	err = db.QueryRow(q, args...).Scan(&s)
	return s.String, err
}

func firstWords(s string) string {
	f := strings.Fields(s)
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}
