package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
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

// FreePort returns a loopback TCP port nobody listens on now. Ports come
// from the kernel's ephemeral range, so test packages running in parallel
// do not collide.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreePorts returns n distinct free loopback ports.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitTCP waits until something accepts connections on the port, or the
// process exits, or the timeout passes.
func waitTCP(p *Process, port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for time.Now().Before(deadline) {
		if p != nil && p.Exited() {
			return fmt.Errorf("%s exited before listening on %d (log: %s)", p.Name, port, p.LogPath)
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	name := "server"
	if p != nil {
		name = p.Name + " (log: " + p.LogPath + ")"
	}
	return errors.New(name + " did not listen on " + addr + " in " + timeout.String())
}
