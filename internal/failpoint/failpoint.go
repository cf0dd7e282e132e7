// Package failpoint lets crash tests kill the manager at a named step, for
// real: the process sends itself SIGKILL, so no deferred cleanup, no status
// write and no connection close runs — exactly what a node failure does.
//
// A failpoint is "name" or "name:N" for the N-th hit. A ":pause" suffix
// ("name:pause", "name:N:pause") stops the process instead (SIGSTOP, as a
// long GC pause or a frozen VM would): it resumes on SIGCONT, right where
// it stopped, with everything it read before. A ":hold" suffix pauses
// too, and holds the leader elector from the hit until every reconcile
// under way at the pause has ended (hold.go).
//
// Only test builds can arm one. The end-to-end tests' manager, built with
// -tags rekeytest, reads it from REKEY_FAILPOINT (env_rekeytest.go); a test
// binary arms one with Arm. Every build users run reads no environment
// variable here (env.go): Hit does nothing in it but call Crash.
package failpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
)

var (
	once   sync.Once
	mu     sync.Mutex
	armed  string
	target = 1
	pause  bool
	held   bool // pause, holding the leader elector (hold.go)
	hits   = map[string]int{}
)

// Arm arms spec ("" disarms) in place of anything REKEY_FAILPOINT says. A
// test process calls it before the steps run: a child of a test binary
// that is to die at a step, where no rekeytest build is involved.
func Arm(spec string) {
	once.Do(func() {})
	set(spec)
}

func set(spec string) {
	mu.Lock()
	defer mu.Unlock()
	armed, target, pause, held, hits = "", 1, false, false, map[string]int{}
	if rest, ok := strings.CutSuffix(spec, ":pause"); ok {
		spec, pause = rest, true
	} else if rest, ok := strings.CutSuffix(spec, ":hold"); ok {
		spec, pause, held = rest, true, true
	}
	name, n, ok := strings.Cut(spec, ":")
	armed = name
	if ok {
		if i, err := strconv.Atoi(n); err == nil && i > 0 {
			target = i
		}
	}
}

// Crash, when set, is called by every Hit before anything armed is
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
	once.Do(func() { set(envSpec()) })
	mu.Lock()
	if armed == "" || armed != name {
		mu.Unlock()
		return
	}
	hits[name]++
	n, stopHere, hold := hits[name], pause, held
	mu.Unlock()
	if n == target && hold {
		holdAndStop(name)
		return
	}
	if n == target && stopHere {
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
