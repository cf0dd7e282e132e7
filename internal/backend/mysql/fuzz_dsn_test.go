package mysql

import (
	"regexp"
	"testing"

	driver "github.com/go-sql-driver/mysql"
)

// FuzzDSN: instance addresses come from the spec (hosts or a StatefulSet's
// DNS names) and passwords from Secrets. Whatever they hold, the DSN rekey
// builds reads back as exactly that address, user and password — no
// parameter (allowAllFiles, a TLS config, a different server) can be
// smuggled in.
func FuzzDSN(f *testing.F) {
	f.Add("db-0.db.ns.svc:3306", "moco-admin", "A1b2C3")
	f.Add("127.0.0.1:3306", "u", "p@ss/word?allowAllFiles=true&tls=false")
	f.Add("[::1]:3306", "x)/y", "a:b@tcp(evil:1)/")
	f.Fuzz(func(t *testing.T, addr, user, password string) {
		if !addrPattern.MatchString(addr) || !namePattern.MatchString(user) {
			// Admission (and New, for user names) only let these through:
			// a ':' in a user name, or '@' in an address, would split the
			// DSN — the fuzzer found both. Passwords are anything.
			return
		}
		cfg, err := driver.ParseDSN(dsn(addr, user, password, "preferred"))
		if err != nil {
			return // refused outright: nothing is dialled
		}
		if cfg.Addr != addr || cfg.User != user || cfg.Passwd != password || cfg.Net != "tcp" {
			t.Fatalf("DSN for addr %q user %q reads back as addr %q user %q net %q (password equal: %v)",
				addr, user, cfg.Addr, cfg.User, cfg.Net, cfg.Passwd == password)
		}
		if cfg.AllowAllFiles || cfg.AllowCleartextPasswords || cfg.AllowOldPasswords || cfg.TLSConfig != "preferred" {
			t.Fatalf("DSN for addr %q user %q enables an option rekey never sets", addr, user)
		}
	})
}

// addrPattern is admission's spec.mysql.instances.hosts pattern, which
// StatefulSet-derived addresses also match.
var addrPattern = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?:[0-9]{1,5}$`)
