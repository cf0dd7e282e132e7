//go:build !unix

package failpoint

// stop cannot pause a process on this platform; the manager only runs on
// Unix, and the plugin builds for others never arm a failpoint.
func stop() {}
