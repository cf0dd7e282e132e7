package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is one server the environment started.
type Process struct {
	Name    string
	LogPath string // on the host
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

type procSpec struct {
	name   string
	path   string // inside root when root is set
	args   []string
	env    []string
	root   string // chroot directory, "" for none
	dir    string
	logOut string // host path of the combined stdout/stderr log
}

func startProcess(s procSpec) (*Process, error) {
	logf, err := os.OpenFile(s.logOut, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(s.path, s.args...)
	cmd.Env = s.env
	cmd.Dir = s.dir
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig: the server dies with the test binary even when the binary
	// is killed before its cleanups run. Setpgid: a stop reaches helpers the
	// server forked.
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: s.root, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.name, err)
	}
	p := &Process{Name: s.name, LogPath: s.logOut, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid is the server's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) error {
	if p.Exited() {
		return nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return nil
}

// Kill ends the process group at once, as a crash would.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// FreePort returns a loopback TCP port nobody uses now, from outside the
// kernel's ephemeral range (see ports.go), and never one this process or a
// test process beside it was given before.
func FreePort() (int, error) { return harnessPort() }

// FreePorts returns n distinct free loopback ports.
func FreePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		port, err := harnessPort()
		if err != nil {
			return nil, err
		}
		ports = append(ports, port)
	}
	return ports, nil
}

// errExitedBeforeListening: the process ended before it listened, e.g. a
// server that could not bind its port.
var errExitedBeforeListening = errors.New("exited before listening")

// waitTCP waits until the process (or one of its process group) listens
// on the port and accepts connections, or the process exits, or the
// timeout passes. Another's listener on the port does not count: it once
// answered for a mysqld that had failed to bind, and the login that
// followed hung on it.
func waitTCP(p *Process, port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("%s %w on %d (log: %s)", p.Name, errExitedBeforeListening, port, p.LogPath)
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			owned, err := p.listensOn(port)
			if owned || (err != nil && !p.Exited()) { // without /proc, alive is the best sign
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New(p.Name + " (log: " + p.LogPath + ") did not listen on " + addr + " in " + timeout.String())
}

// listensOn reports whether a process of p's group holds a socket that
// listens on the port. The harness's servers share the test binary's
// network namespace, so its own /proc/self/net lists their sockets; a
// server that forks keeps its process group (Setpgid made it the leader).
// An error means /proc could not tell.
func (p *Process) listensOn(port int) (bool, error) {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			if f == "/proc/self/net/tcp" {
				return false, err
			}
			continue // no IPv6
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx rx tr retrnsmt uid timeout inode
			x := strings.Fields(line)
			if len(x) < 10 || x[3] != "0A" { // 0A: TCP_LISTEN
				continue
			}
			if k := strings.LastIndexByte(x[1], ':'); k >= 0 {
				if n, err := strconv.ParseUint(x[1][k+1:], 16, 16); err == nil && int(n) == port {
					inodes["socket:["+x[9]+"]"] = true
				}
			}
		}
	}
	if len(inodes) == 0 {
		return false, nil
	}
	pids, err := os.ReadDir("/proc")
	if err != nil {
		return false, err
	}
	leader := strconv.Itoa(p.Pid())
	for _, d := range pids {
		if d.Name() != leader && !inGroup(d.Name(), p.Pid()) {
			continue
		}
		fds, _ := os.ReadDir("/proc/" + d.Name() + "/fd")
		for _, fd := range fds {
			if l, _ := os.Readlink("/proc/" + d.Name() + "/fd/" + fd.Name()); inodes[l] {
				return true, nil
			}
		}
	}
	return false, nil
}

// inGroup: /proc/<pid>/stat names pgid as the process group.
func inGroup(pid string, pgid int) bool {
	if pid == "" || pid[0] < '0' || pid[0] > '9' {
		return false
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 2 && f[2] == strconv.Itoa(pgid)
}
