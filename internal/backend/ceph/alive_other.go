//go:build !unix

package ceph

// alive cannot tell without a signal, so another process's work folder is
// kept. The manager runs on Linux only; the kubectl plugin, built for
// Windows too, links this package but never sweeps a WorkDir.
func alive(int) bool { return true }
