package mysql

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"rekey.io/rekey/internal/engine"
)

// Version implements engine.Backend: the lowest server version across the
// instances, so that a rolling upgrade counts as done only when every
// instance runs the new version. It reads over a plain connection: a
// version query needs neither sql_log_bin nor super_read_only touched.
func (b *Backend) Version(ctx context.Context, cur engine.Secrets) (string, error) {
	var (
		mu     sync.Mutex
		lowest string
	)
	var g errgroup.Group
	g.SetLimit(max(b.Concurrency, 1))
	for _, inst := range b.Instances {
		g.Go(func() error {
			v, err := b.instanceVersion(ctx, inst, b.adminPasswords(cur, nil))
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if lowest == "" || engine.CompareVersions(v, lowest) < 0 {
				lowest = v
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return "", err
	}
	if lowest == "" {
		return "", fmt.Errorf("no instances to read the MySQL version from")
	}
	return lowest, nil
}

func (b *Backend) instanceVersion(ctx context.Context, inst Instance, passwords []string) (string, error) {
	var lastErr error
	for _, pw := range passwords {
		if pw == "" {
			continue
		}
		db, err := b.transport.open(inst, b.AdminUser, pw)
		if err != nil {
			return "", err
		}
		var v string
		err = db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v)
		db.Close()
		if err == nil {
			// "9.7.4-log" and similar suffixes are not part of the version.
			v, _, _ = strings.Cut(v, "-")
			return v, nil
		}
		lastErr = err
		if !isAccessDenied(err) {
			return "", b.transport.connError(inst, err, passwords...)
		}
	}
	return "", fmt.Errorf("read the version of %s as %s: %w", inst.Name, b.AdminUser, redact(lastErr, passwords...))
}
