//go:build unix

package ceph

import (
	"errors"
	"syscall"
)

// alive: signal 0 reaches the process (EPERM: it runs as another user).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
