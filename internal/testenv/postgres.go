package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgresBin is where Debian's postgresql-15 puts the server programs.
const postgresBin = "/usr/lib/postgresql/15/bin"

// Postgres is a private PostgreSQL primary and one streaming replica
// (pg_basebackup -R), both on loopback and serving TLS with a certificate
// CAPEM signed, as a CredentialSet verifies by default.
type Postgres struct {
	Primary, Replica *PostgresInstance
	// AdminUser is the bootstrap superuser; AdminPassword its password.
	AdminUser, AdminPassword string
	CAPEM                    []byte
	Version                  string // server_version, e.g. "15.18 (Debian ...)"

	dir      string
	uid, gid int
	stopOnce sync.Once
	pki      *testPKI // what Rejoin starts an instance with
}

// PostgresInstance is one postmaster.
type PostgresInstance struct {
	Name string
	Port int
	Data string

	// LogPath is the server's log (connections and DDL statements).
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
}

// Addr is host:port.
func (i *PostgresInstance) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(i.Port)) }

// Exited reports whether the postmaster has ended.
func (i *PostgresInstance) Exited() bool {
	select {
	case <-i.done:
		return true
	default:
		return false
	}
}

// StartPostgres initialises a primary, clones a replica from it and starts
// both. The server refuses to run as root, so everything runs as Debian's
// postgres user, in a directory it owns.
func (e *Env) StartPostgres() (p *Postgres, err error) {
	if err := e.requireFile(postgresBin+"/postgres", "postgresql-15"); err != nil {
		return nil, err
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("postgres: the postgres system user (made by Debian's postgresql package) is missing: run `make env`: %w", err)
	}
	dir, err := os.MkdirTemp("", "rekey-postgres-")
	if err != nil {
		return nil, err
	}
	p = &Postgres{dir: dir, AdminUser: "postgres", AdminPassword: randHex(16)}
	p.uid, _ = strconv.Atoi(u.Uid)
	p.gid, _ = strconv.Atoi(u.Gid)
	defer func() {
		if err != nil {
			p.stop(true) // the error names the log
		}
	}()
	pki, err := newTestPKI(dir)
	if err != nil {
		return p, err
	}
	p.CAPEM, p.pki = pki.caPEM, pki
	if err := os.WriteFile(filepath.Join(dir, "pwfile"), []byte(p.AdminPassword+"\n"), 0o600); err != nil {
		return p, err
	}
	if err := p.chownAll(); err != nil {
		return p, err
	}
	ports, err := FreePorts(2)
	if err != nil {
		return p, err
	}
	p.Primary = &PostgresInstance{Name: "primary", Port: ports[0], Data: filepath.Join(dir, "primary")}
	p.Replica = &PostgresInstance{Name: "replica", Port: ports[1], Data: filepath.Join(dir, "replica")}
	if err := p.run("initdb", "-D", p.Primary.Data, "-U", p.AdminUser, "--pwfile="+filepath.Join(dir, "pwfile"),
		"--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		return p, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := p.startInstance(ctx, p.Primary, pki); err != nil {
		return p, err
	}
	// The replica authenticates as the superuser, which may replicate: a
	// test cluster needs no replication role of its own.
	if err := p.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.Primary.Port), "-U", p.AdminUser,
		"-D", p.Replica.Data, "-R", "-X", "stream", "--no-sync", "-c", "fast"); err != nil {
		return p, err
	}
	if err := p.startInstance(ctx, p.Replica, pki); err != nil {
		return p, err
	}
	c, err := p.Admin(ctx, p.Replica)
	if err != nil {
		return p, err
	}
	defer c.Close(ctx)
	var standby bool
	if err := c.QueryRow(ctx, "SELECT pg_is_in_recovery(), current_setting('server_version')").Scan(&standby, &p.Version); err != nil {
		return p, err
	}
	if !standby {
		return p, errors.New("postgres: the replica is not in recovery")
	}
	if want := e.Versions["POSTGRES_SERIES"]; want == "" || !strings.HasPrefix(p.Version, want) {
		return p, fmt.Errorf("postgres %s is not the pinned %s*: run `make env` or update hack/env/versions.env", p.Version, want)
	}
	return p, nil
}

// PostgresForTest starts a primary and a replica for the test and stops
// them when it ends.
func PostgresForTest(t testing.TB) *Postgres {
	t.Helper()
	e := Require(t)
	p, err := e.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	t.Logf("PostgreSQL %s: primary %s, replica %s", p.Version, p.Primary.Addr(), p.Replica.Addr())
	return p
}

// startInstance starts i, on another free port when the one picked was
// taken between the pick and postgres's bind (another server of a test
// running beside this one): a race of the test machine, not a failure.
func (p *Postgres) startInstance(ctx context.Context, i *PostgresInstance, pki *testPKI) error {
	for attempt := 1; ; attempt++ {
		err := p.startInstanceOnce(ctx, i, pki)
		if err == nil || attempt == 5 || !portTaken(i.LogPath) {
			return err
		}
		port, perr := FreePort()
		if perr != nil {
			return err
		}
		i.Port = port
	}
}

// portTaken: the log's last start failed because its port was in use.
func portTaken(logPath string) bool {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return false
	}
	s := string(b)
	if k := strings.LastIndex(s, "starting PostgreSQL"); k >= 0 {
		s = s[k:]
	}
	return strings.Contains(s, "Address already in use")
}

func (p *Postgres) startInstanceOnce(ctx context.Context, i *PostgresInstance, pki *testPKI) error {
	i.LogPath = filepath.Join(p.dir, i.Name+".log")
	logf, err := os.OpenFile(i.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	// fsync off: the tests crash processes, never the machine.
	i.cmd = exec.Command(postgresBin+"/postgres", "-D", i.Data, "-p", strconv.Itoa(i.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+p.dir,
		"-c", "ssl=on", "-c", "ssl_cert_file="+pki.certFile, "-c", "ssl_key_file="+pki.keyFile,
		"-c", "fsync=off", "-c", "shared_buffers=16MB", "-c", "max_connections=60",
		"-c", "log_connections=on", "-c", "log_statement=ddl")
	i.cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	i.cmd.Dir = p.dir
	i.cmd.Stdout, i.cmd.Stderr = logf, logf
	i.cmd.SysProcAttr = p.procAttr()
	if err := i.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres %s: %w", i.Name, err)
	}
	i.done = make(chan struct{})
	go func() { _ = i.cmd.Wait(); close(i.done) }()
	var last error
	for ctx.Err() == nil {
		if i.Exited() {
			return fmt.Errorf("postgres %s exited while starting (log: %s)", i.Name, i.LogPath)
		}
		c, err := p.Admin(ctx, i)
		if err == nil {
			c.Close(ctx)
			return nil
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("postgres %s did not accept connections: %v (log: %s)", i.Name, last, i.LogPath)
}

func (p *Postgres) procAttr() *syscall.SysProcAttr {
	// Go sets the parent-death signal after switching user, so the
	// postmaster still dies with a killed test binary.
	return &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(p.uid), Gid: uint32(p.gid)},
		Pdeathsig:  syscall.SIGKILL, Setpgid: true,
	}
}

// run runs one of the server's programs as the postgres user.
func (p *Postgres) run(prog string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(postgresBin, prog), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "PGPASSWORD=" + p.AdminPassword, "PGSSLMODE=require"}
	cmd.Dir = p.dir
	cmd.SysProcAttr = p.procAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", prog, err, out)
	}
	return nil
}

func (p *Postgres) chownAll() error {
	return filepath.Walk(p.dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(path, p.uid, p.gid)
	})
}

// TLSConfig trusts the cluster's CA alone and checks the host name, as
// sslmode=verify-full does.
func (p *Postgres) TLSConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CAPEM)
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// Connect logs in to instance i as user over verified TLS.
func (p *Postgres) Connect(ctx context.Context, i *PostgresInstance, user, password, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Database = "127.0.0.1", uint16(i.Port), user, password, db
	cfg.TLSConfig, cfg.Fallbacks = p.TLSConfig(), nil
	cfg.ConnectTimeout = 10 * time.Second
	return pgx.ConnectConfig(ctx, cfg)
}

// Admin is a connection as the superuser to database postgres.
func (p *Postgres) Admin(ctx context.Context, i *PostgresInstance) (*pgx.Conn, error) {
	return p.Connect(ctx, i, p.AdminUser, p.AdminPassword, "postgres")
}

// CanLogin reports whether user logs in to i with password (nil) or why not.
func (p *Postgres) CanLogin(i *PostgresInstance, user, password string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := p.Connect(ctx, i, user, password, "postgres")
	if err != nil {
		return err
	}
	return c.Close(ctx)
}

// RoleExists reports whether the primary has role.
func (p *Postgres) RoleExists(role string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := p.Admin(ctx, p.Primary)
	if err != nil {
		return false, err
	}
	defer c.Close(ctx)
	var n int
	err = c.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = $1", role).Scan(&n)
	return n == 1, err
}

// Exec runs statements on i as the superuser.
func (p *Postgres) Exec(i *PostgresInstance, stmts ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := p.Admin(ctx, i)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	for _, s := range stmts {
		if _, err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// Stop stops the replica, then the primary, and removes their directory.
func (p *Postgres) Stop() { p.stop(false) }

func (p *Postgres) stop(keepDir bool) {
	p.stopOnce.Do(func() {
		for _, i := range []*PostgresInstance{p.Replica, p.Primary} {
			if i == nil || i.cmd == nil || i.Exited() {
				continue
			}
			// SIGINT is the fast shutdown: sessions are ended, not waited for.
			_ = i.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-i.done:
			case <-time.After(30 * time.Second):
				_ = syscall.Kill(-i.cmd.Process.Pid, syscall.SIGKILL)
				<-i.done
			}
		}
		if !keepDir {
			os.RemoveAll(p.dir)
		}
	})
}

// Pgbench runs Debian's pgbench (a client nobody here wrote) as user
// against i over TLS verified against the cluster's CA, and returns its
// output.
func (p *Postgres) Pgbench(i *PostgresInstance, user, password string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(postgresBin, "pgbench"), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8",
		"PGHOST=127.0.0.1", "PGPORT=" + strconv.Itoa(i.Port), "PGDATABASE=postgres",
		"PGUSER=" + user, "PGPASSWORD=" + password,
		"PGSSLMODE=verify-full", "PGSSLROOTCERT=" + filepath.Join(p.dir, "ca.pem")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgbench %v on the %s as %s: %w", args, i.Name, user, err)
	}
	return string(out), nil
}
