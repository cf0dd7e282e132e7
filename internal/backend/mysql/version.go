package mysql

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
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
	var refused *loginFailure
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
		lf, ok := asLoginFailure(inst, b.AdminUser, err)
		if !ok {
			return "", b.transport.connError(inst, err, passwords...)
		}
		refused = lf
		if lf.kind == failLocked {
			break // see openSession
		}
	}
	if refused == nil {
		return "", fmt.Errorf("read the version of %s as %s: no password to connect with", inst.Name, b.AdminUser)
	}
	return "", b.adminLoginError(refused)
}

// minVersion is the oldest MySQL the backend's statements run on. Each
// statement it sends and the release that brought it:
//
//   - CREATE USER ... ATTRIBUTE and ALTER USER ... ATTRIBUTE (the mark of
//     a user rekey is still creating, repair.go): 8.0.21 — the floor;
//   - ALTER USER ... RETAIN CURRENT PASSWORD / DISCARD OLD PASSWORD and
//     mysql.user.User_attributes' additional_password: 8.0.14;
//   - performance_schema.clone_status: 8.0.17 (a missing table is read as
//     "no clone", so older servers would pass the health gate anyway);
//   - SHOW REPLICA STATUS: 8.0.22, with SHOW SLAVE STATUS as the fallback
//     before it (health.go), so it does not raise the floor;
//   - super_read_only 5.7.8, JSON_CONTAINS_PATH 5.7.
//
// MariaDB shares the protocol and reports versions above it (10.x, 11.x)
// but has none of the dual-password statements, so it is refused by name.
const minVersion = "8.0.21"

// versionRefusal decides whether the server on instance, which reports
// raw as VERSION(), can run the backend's statements: nil if it can, else
// the refusal naming the version found, the floor and what to do. Pure:
// the instance is asked elsewhere.
func versionRefusal(instance, raw string) *engine.Refusal {
	v, _, _ := strings.Cut(strings.TrimSpace(raw), "-")
	raw = quotableVersion(raw)
	switch {
	case strings.Contains(strings.ToLower(raw), "mariadb"):
		return &engine.Refusal{Reason: string(reason.UnsupportedVersion), Message: fmt.Sprintf(
			"%s runs MariaDB (%s), which has no dual passwords (ALTER USER ... RETAIN CURRENT PASSWORD); rekey rotates MySQL %s or newer only. Nothing was changed: point the set at a MySQL cluster", instance, raw, minVersion)}
	case !wellFormedVersion(v):
		return &engine.Refusal{Reason: string(reason.UnsupportedVersion), Message: fmt.Sprintf(
			"%s reports version %q, which rekey cannot read as a MySQL version; it needs MySQL %s or newer. Nothing was changed: check that the set points at a MySQL server", instance, raw, minVersion)}
	case engine.CompareVersions(v, minVersion) < 0:
		return &engine.Refusal{Reason: string(reason.UnsupportedVersion), Message: fmt.Sprintf(
			"%s runs MySQL %s; rekey needs MySQL %s or newer (CREATE USER ... ATTRIBUTE, dual passwords). Nothing was changed: upgrade %s to %s or newer and rekey goes on by itself", instance, v, minVersion, instance, minVersion)}
	}
	return nil
}

// quotableVersion is raw if it is shaped like a version string (short,
// letters, digits and . + ~ _ -), else a placeholder: whatever answers on
// the address the set names must not have its text repeated.
func quotableVersion(raw string) string {
	if len(raw) <= 64 && versionChars.MatchString(raw) {
		return raw
	}
	return "(not a version string)"
}

var versionChars = regexp.MustCompile(`^[0-9A-Za-z.+~_-]+$`)

// wellFormedVersion: digits separated by dots, at least major.minor.
func wellFormedVersion(v string) bool {
	parts := strings.Split(v, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// checkVersion refuses, in an open session, a server older than
// minVersion: before the first statement that needs it, where the backend
// first connects to a cluster (Provision) and before a rotation starts
// (Precheck), so a server downgraded or replaced later is caught too.
func (s *session) checkVersion(ctx context.Context) error {
	var raw string
	if err := s.conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&raw); err != nil {
		return s.wrap("read the version", err)
	}
	if rf := versionRefusal(s.inst.Name, raw); rf != nil {
		return rf
	}
	return nil
}
