//go:build rekeytest

package failpoint

import "os"

// envSpec is REKEY_FAILPOINT, read only by the manager the end-to-end
// tests build with -tags rekeytest (test/e2e buildManager): their crash
// tests start it armed at one step.
func envSpec() string { return os.Getenv("REKEY_FAILPOINT") }
