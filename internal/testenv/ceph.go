package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// CephPath is one file or folder of a Ceph cluster as the host and as the
// sid chroot see it. Ceph's tools run inside the chroot and need the Chroot
// form; Go code on the host reads and writes the Host form.
type CephPath struct {
	Host   string
	Chroot string
}

// Ceph is a one-mon cluster with cephx running in the sid chroot. It has no
// OSD or mgr: the monitor alone keeps the auth database, which is all the
// Ceph backend touches.
type Ceph struct {
	Version string // of the chroot's ceph, e.g. 20.2.4
	FSID    string
	MonAddr string // as in ceph.conf's mon_host: v2:127.0.0.1:PORT

	Dir          CephPath // everything of this cluster lives here
	Conf         CephPath
	AdminKeyring CephPath // client.admin with allow * on mon, osd, mds and mgr

	// CLIPath is a host-side script that runs the chroot's ceph CLI against
	// this cluster (-c is preset): the form the Ceph backend takes as "the
	// path of the ceph CLI". See writeCLIWrapper for the paths it accepts.
	CLIPath string

	env  *Env
	proc *Process
}

var (
	cephVersionOnce sync.Once
	cephVersion     string
	cephVersionErr  error
)

// CephVersion is the version of the chroot's ceph, checked against the pin.
func (e *Env) CephVersion() (string, error) {
	cephVersionOnce.Do(func() {
		if err := e.requireFile(filepath.Join(e.SidDir, ".rekey-ready"), "the sid chroot"); err != nil {
			cephVersionErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := e.chrootRun(ctx, "/usr/bin/ceph", "--version")
		if err != nil {
			cephVersionErr = err
			return
		}
		// "ceph version 20.2.4 (7f79…) tentacle (stable)"
		if f := strings.Fields(string(out)); len(f) >= 3 && f[1] == "version" {
			cephVersion = f[2]
		}
		if !strings.HasPrefix(cephVersion, e.Versions["CEPH_SERIES"]) {
			cephVersionErr = fmt.Errorf("ceph %q is not the pinned %s*: run `make env`", cephVersion, e.Versions["CEPH_SERIES"])
		}
	})
	return cephVersion, cephVersionErr
}

var cephSeq struct {
	sync.Mutex
	n int
}

// errMonBind means ceph-mon lost its port to another process between
// FreePort and its bind; a new port fixes it.
var errMonBind = errors.New("ceph-mon could not bind its port")

// StartCeph creates a cluster with one mon and waits until client.admin can
// talk to it.
func (e *Env) StartCeph() (*Ceph, error) {
	version, err := e.CephVersion()
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		c, err := e.newCeph(version)
		if err == nil {
			err = c.start()
		}
		if err == nil {
			return c, nil
		}
		if c != nil {
			c.Stop()
		}
		if !errors.Is(err, errMonBind) || attempt == 3 {
			return nil, err
		}
	}
}

func (e *Env) newCeph(version string) (*Ceph, error) {
	cephSeq.Lock()
	cephSeq.n++
	seq := cephSeq.n
	cephSeq.Unlock()
	dir := fmt.Sprintf("/tmp/rekey-ceph-%d-%d", os.Getpid(), seq)
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	fsid, err := newUUID()
	if err != nil {
		return nil, err
	}
	path := func(name string) CephPath {
		return CephPath{Host: filepath.Join(e.SidDir, dir, name), Chroot: filepath.Join(dir, name)}
	}
	c := &Ceph{
		Version: version, FSID: fsid, MonAddr: fmt.Sprintf("v2:127.0.0.1:%d", port),
		Dir: path("."), Conf: path("ceph.conf"), AdminKeyring: path("admin.keyring"),
		CLIPath: path("ceph").Host, env: e,
	}
	os.RemoveAll(c.Dir.Host)
	for _, d := range []string{"run", "log", "mon", "crash"} {
		if err := os.MkdirAll(filepath.Join(c.Dir.Host, d), 0o700); err != nil {
			return c, err
		}
	}
	if err := os.WriteFile(c.Conf.Host, []byte(c.conf()), 0o644); err != nil {
		return c, err
	}
	return c, c.writeCLIWrapper()
}

// conf keeps every file the mon writes inside the cluster's folder, so that
// clusters of parallel test binaries share nothing in the chroot. Clients
// get no log file: the CLI's stderr says enough.
func (c *Ceph) conf() string {
	d := c.Dir.Chroot
	return fmt.Sprintf(`[global]
fsid = %s
mon_initial_members = a
mon_host = %s
ms_bind_msgr1 = false
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
run_dir = %[3]s/run
crash_dir = %[3]s/crash
log_file =

[mon]
mon_data = %[3]s/mon/$cluster-$id
admin_socket = %[3]s/run/$cluster-$name.asok
log_file = %[3]s/log/$cluster-$name.log
mon_cluster_log_file = %[3]s/log/$cluster.$channel.log
# Give up on a taken port in a second instead of retrying for 10 s:
# StartCeph picks another.
ms_bind_retry_count = 1
ms_bind_retry_delay = 1
`, c.FSID, c.MonAddr, d)
}

// start creates the keyrings and the mon store, runs ceph-mon in the
// foreground and waits for it.
func (c *Ceph) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := c.Dir.Chroot
	monKeyring := d + "/mon.keyring"
	steps := [][]string{
		{"/usr/bin/ceph-authtool", "--create-keyring", monKeyring, "--gen-key", "-n", "mon.", "--cap", "mon", "allow *"},
		{"/usr/bin/ceph-authtool", "--create-keyring", c.AdminKeyring.Chroot, "--gen-key", "-n", "client.admin",
			"--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mds", "allow *", "--cap", "mgr", "allow *"},
		{"/usr/bin/ceph-authtool", monKeyring, "--import-keyring", c.AdminKeyring.Chroot},
		// With mon_initial_members and mon_host, --mkfs builds the monmap
		// itself: no monmaptool.
		{"/usr/bin/ceph-mon", "-c", c.Conf.Chroot, "--mkfs", "-i", "a", "--keyring", monKeyring},
	}
	for _, s := range steps {
		if _, err := c.env.chrootRun(ctx, s[0], s[1:]...); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(s[0]), err)
		}
	}
	p, err := startProcess(procSpec{
		name: "ceph-mon", path: "/usr/bin/ceph-mon",
		args: []string{"-f", "-i", "a", "-c", c.Conf.Chroot},
		env:  []string{"PATH=/usr/sbin:/usr/bin:/bin"}, root: c.env.SidDir,
		logOut: filepath.Join(c.Dir.Host, "stdout.log"),
	})
	if err != nil {
		return err
	}
	c.proc = p
	// 30 s ran out at load 40 (make test's parallel processes on 2 cores).
	return c.waitReady(90 * time.Second)
}

// waitReady waits until client.admin reads this cluster's fsid. Something
// merely listening on the port is not enough: it may be another test
// binary's mon that took the port first.
func (c *Ceph) waitReady(timeout time.Duration) error {
	monLog := filepath.Join(c.Dir.Host, "log", "ceph-mon.a.log")
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if c.proc.Exited() {
			if b, _ := os.ReadFile(monLog); bytes.Contains(b, []byte("unable to bind")) {
				return fmt.Errorf("%w %s (log: %s)", errMonBind, c.MonAddr, monLog)
			}
			return fmt.Errorf("ceph-mon exited (log: %s, %s)", monLog, c.proc.LogPath)
		}
		// A foreign listener may never answer: stop asking when our mon
		// exits rather than when the CLI gives up.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		go func() {
			select {
			case <-c.proc.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		var out []byte
		out, err = c.CLI(ctx, "fsid")
		cancel()
		if err == nil && strings.TrimSpace(string(out)) == c.FSID {
			return nil
		}
		if err == nil {
			err = errors.New("another cluster answers on " + c.MonAddr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("ceph-mon on %s not ready in %s: %w (log: %s)", c.MonAddr, timeout, err, monLog)
}

// Stop stops ceph-mon and removes the cluster's folder. It is safe to call
// more than once.
func (c *Ceph) Stop() {
	if c.proc != nil {
		c.proc.Stop(10 * time.Second)
	}
	os.RemoveAll(c.Dir.Host)
}

// CephForTest starts a cluster for the test and stops it when the test ends.
func CephForTest(t testing.TB) *Ceph {
	t.Helper()
	e := Require(t)
	c, err := e.StartCeph()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	t.Logf("ceph %s: mon a at %s, conf %s", c.Version, c.MonAddr, c.Conf.Host)
	return c
}

// newUUID is a random (version 4) UUID for the fsid.
func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]), nil
}
