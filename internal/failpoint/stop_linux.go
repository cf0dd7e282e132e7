package failpoint

import (
	"runtime"
	"syscall"
)

// stop sends SIGSTOP to the calling thread itself: the whole process halts
// until SIGCONT, and this thread before it runs another instruction of the
// step (a signal sent to the process may be taken by another thread, and
// this one would go on for a moment: a paused step that has half run).
func stop() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}
