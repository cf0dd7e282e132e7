// Command kubectl-rekey is the kubectl plugin for rekey's CredentialSets:
// kubectl finds it on PATH and runs it as `kubectl rekey`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	// Every backend rekey ships: the plugin describes sets only through
	// the backend registry.
	_ "rekey.io/rekey/internal/backend/all"
	"rekey.io/rekey/internal/plugin"
)

func main() {
	// Ctrl-C stops a --wait cleanly; the rotation itself goes on server-side.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := plugin.Main(ctx, os.Args[1:], plugin.Options{Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
