package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Harness servers listen on ports from outside the kernel's ephemeral range.
// A port picked from inside it (listen on :0, close) could be taken before
// the server bound it: by another test's server picking the same way, or as
// the local port of any outgoing connection, which blocks the bind even with
// SO_REUSEADDR. mysqld then exited on "Address already in use" while
// whatever held the port answered the harness's dial, and the harness's
// login hung on it. Outgoing connections never get a port outside the
// range, and the test processes running side by side (go test runs
// packages in parallel) share a lock file with a lock per port handed out.

const (
	// poolFloor keeps the pool clear of the well-known and registered
	// ports services on a developer machine tend to listen on.
	poolFloor = 20000
	minPool   = 1000
	// fOFDSetlk is F_OFD_SETLK from linux/fcntl.h (the syscall package
	// lacks it). Locks on an open file description, unlike classic POSIX
	// locks, conflict between descriptions within one process too (what
	// the allocator's test relies on), and go with the process all the
	// same: the description closes when it exits.
	fOFDSetlk = 37
)

// portAllocator hands out each port of its pool at most once per lap.
type portAllocator struct {
	mu          sync.Mutex
	lo, size    int
	start, next int      // candidate n is lo + (start+n) % size
	lock        *os.File // nil: no lock file, the pid-derived start alone spreads processes apart
}

func newPortAllocator(lo, hi int, lockPath string, seed int) *portAllocator {
	a := &portAllocator{lo: lo, size: hi - lo + 1}
	// Processes start a stride apart so that they seldom even compete
	// for a lock.
	a.start = seed * 997 % a.size
	if f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o666); err == nil {
		a.lock = f
	}
	return a
}

// take returns the next port of the pool that no other allocator holds a
// lock on and that a listen on every address gets.
func (a *portAllocator) take() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range a.size {
		port := a.lo + (a.start+a.next)%a.size
		a.next++
		if !a.lockPort(port) || !portFree(port) {
			continue
		}
		return port, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d", a.lo, a.lo+a.size-1)
}

// lockPort takes the lock on the port's byte of the lock file, kept for the
// life of the process: the server on the port may run until the end. An
// error other than the lock being held elsewhere (an old kernel without OFD
// locks) counts as got.
func (a *portAllocator) lockPort(port int) bool {
	if a.lock == nil {
		return true
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: int64(port), Len: 1}
	err := syscall.FcntlFlock(a.lock.Fd(), fOFDSetlk, &lk)
	return !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EACCES)
}

// portFree: nothing is bound to the port on any address. The wildcard
// listen fails on any socket using the port, a listener or a connection.
func portFree(port int) bool {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// portPool is the range harness ports come from, given the kernel's
// ephemeral range: below it from poolFloor, else above it, else below it
// from 1024. ok is false when none of these holds minPool ports.
func portPool(ephLow, ephHigh int) (lo, hi int, ok bool) {
	switch {
	case ephLow-poolFloor >= minPool:
		return poolFloor, ephLow - 1, true
	case 65535-ephHigh >= minPool:
		return ephHigh + 1, 65535, true
	case ephLow-1024 >= minPool:
		return 1024, ephLow - 1, true
	}
	return 0, 0, false
}

// ephemeralRange reads the kernel's range; Linux's default when unreadable.
func ephemeralRange() (low, high int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && 0 < l && l <= h {
				return l, h
			}
		}
	}
	return 32768, 60999
}

var (
	harnessPortsOnce sync.Once
	harnessPorts     *portAllocator // nil: no pool outside the ephemeral range
	kernelPorts      struct {
		sync.Mutex
		given map[int]bool
	}
)

func harnessPort() (int, error) {
	harnessPortsOnce.Do(func() {
		if lo, hi, ok := portPool(ephemeralRange()); ok {
			harnessPorts = newPortAllocator(lo, hi, filepath.Join(os.TempDir(), "rekey-testenv-ports.lock"), os.Getpid())
		}
	})
	if harnessPorts != nil {
		return harnessPorts.take()
	}
	return kernelPort()
}

// kernelPort is the fallback on a machine whose ephemeral range leaves no
// room: a port the kernel picks, never one this process handed out before.
func kernelPort() (int, error) {
	kernelPorts.Lock()
	defer kernelPorts.Unlock()
	if kernelPorts.given == nil {
		kernelPorts.given = map[int]bool{}
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !kernelPorts.given[port] {
			kernelPorts.given[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no free port the kernel offered was new")
}
