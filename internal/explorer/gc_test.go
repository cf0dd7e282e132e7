package explorer

import (
	"os"
	"runtime/debug"
)

// Every step builds a fake API server's objects afresh and every state
// reached is kept, so the collector at Go's default (GOGC=100) took about
// a fifth of the explorer's CPU (TestCephAdmin: 22 s of CPU, 18 s at 400,
// measured side by side), and make test runs it beside the end-to-end
// processes on 2 cores. Still so with setPatch and Clone's deep copies
// (TestCephAdmin, TestTwoSets and TestPathDeletion: 30.4 s of CPU at 100,
// 22.9 s at 400, 21.8 s at 800 for half as much heap again), measured side
// by side. The heap it costs is small (about 300 MB for those tests).
// GOGC set in the environment wins.
func init() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}
