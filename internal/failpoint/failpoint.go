// Package failpoint lets crash tests kill the manager at a named step, for
// real: the process sends itself SIGKILL, so no deferred cleanup, no status
// write and no connection close runs — exactly what a node failure does.
//
// It is armed only by the REKEY_FAILPOINT environment variable
// ("name" or "name:N" for the N-th hit); unset, Hit is one map lookup.
// A ":pause" suffix ("name:pause", "name:N:pause") stops the process
// instead (SIGSTOP, as a long GC pause or a frozen VM would): it resumes
// on SIGCONT, right where it stopped, with everything it read before.
package failpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
)

var (
	once   sync.Once
	armed  string
	target = 1
	pause  bool
	mu     sync.Mutex
	hits   = map[string]int{}
)

func load() {
	v := os.Getenv("REKEY_FAILPOINT")
	if rest, ok := strings.CutSuffix(v, ":pause"); ok {
		v, pause = rest, true
	}
	name, n, ok := strings.Cut(v, ":")
	armed = name
	if ok {
		if i, err := strconv.Atoi(n); err == nil && i > 0 {
			target = i
		}
	}
}

// Crash, when set, is called by every Hit before the environment is
// consulted: the state-space explorer (internal/explorer) crashes the
// manager in-process at a persisted step by panicking from it, since it
// explores thousands of crashes and cannot spend a process on each.
// Production never sets it.
var Crash func(name string)

// Hit kills the process if name is the armed failpoint and this is the
// armed hit.
func Hit(name string) {
	if Crash != nil {
		Crash(name)
	}
	once.Do(load)
	if armed == "" || armed != name {
		return
	}
	mu.Lock()
	hits[name]++
	n := hits[name]
	mu.Unlock()
	if n == target && pause {
		os.Stderr.WriteString("failpoint " + name + " hit: pausing the process\n")
		stop()
		os.Stderr.WriteString("failpoint " + name + ": resumed\n")
		return
	}
	if n == target {
		os.Stderr.WriteString("failpoint " + name + " hit: killing the process\n")
		// os.Process.Kill is SIGKILL on Unix (and builds for the plugin's
		// other platforms, which import this package through the engine).
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Kill()
		}
		select {} // SIGKILL is not deliverable late, but never continue
	}
}
