//go:build unix && !linux

package failpoint

import "syscall"

// stop sends the process SIGSTOP: every thread halts until SIGCONT.
func stop() { _ = syscall.Kill(syscall.Getpid(), syscall.SIGSTOP) }
