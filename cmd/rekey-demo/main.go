// Command rekey-demo is `make demo`: rekey's main job on an embedded local
// environment. Ctrl-C stops everything it started.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"rekey.io/rekey/internal/demo"
)

func main() {
	plugin := flag.String("plugin", "bin/kubectl-rekey", "path of the kubectl-rekey binary")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, os.Stdout, *plugin); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}
