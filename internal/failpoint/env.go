//go:build !rekeytest

package failpoint

// envSpec is what the environment arms: nothing, in every build without
// the rekeytest tag (every build users run). REKEY_FAILPOINT is not read,
// so no setting of a user's can make the manager kill or stop itself.
func envSpec() string { return "" }
