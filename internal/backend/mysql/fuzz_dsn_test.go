package mysql

import (
	"net"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// FuzzDSN: instance addresses come from the spec (hosts or a StatefulSet's
// DNS names), the admin's name from the spec and passwords from Secrets.
// Whatever they hold, a backend New accepts connects to exactly that
// address as exactly that user with exactly that password, verifying TLS
// for the address's host — no driver option (allowAllFiles, another TLS
// config, another server) can be smuggled in. The driver configuration is
// built field by field, never parsed, and this holds it to that.
func FuzzDSN(f *testing.F) {
	f.Add("db-0.db.ns.svc:3306", "moco-admin", "A1b2C3", "")
	f.Add("127.0.0.1:3306", "u", "p@ss/word?allowAllFiles=true&tls=false", "localhost")
	f.Add("[::1]:3306", "x)/y", "a:b@tcp(evil:1)/", "")
	f.Add("db:3306?tls=false", "a", "b", "evil.example")
	f.Add("db:99999", "a", "b", "")
	f.Add("db:3306", "a", "b", "a/b")
	f.Fuzz(func(t *testing.T, addr, user, password, serverName string) {
		spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: user}, Users: []v1.MySQLUser{{Name: "app"}}, TLSServerName: serverName}
		b, err := New(spec, []Instance{{Name: "i", Addr: addr}}, password, nil)
		if err != nil {
			if password != "" && len(password) >= 4 && strings.Contains(err.Error(), password) {
				t.Fatalf("New's error holds the password: %v", err)
			}
			return
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil || strings.ContainsAny(addr, "()/?&=@[]") || strings.ContainsAny(user, ":@/()") {
			t.Fatalf("New accepted address %q user %q", addr, user)
		}
		c := b.transport.config(b.Instances[0], b.AdminUser, password)
		if c.Addr != addr || c.User != user || c.Passwd != password || c.Net != "tcp" {
			t.Fatalf("config for addr %q user %q is addr %q user %q net %q (password equal: %v)",
				addr, user, c.Addr, c.User, c.Net, c.Passwd == password)
		}
		if c.AllowAllFiles || c.AllowCleartextPasswords || c.AllowOldPasswords || c.AllowFallbackToPlaintext ||
			c.TLSConfig != "" || c.MultiStatements || len(c.Params) > 0 {
			t.Fatalf("config for addr %q user %q enables an option rekey never sets", addr, user)
		}
		want := host
		if serverName != "" {
			want = serverName
		}
		if c.TLS == nil || c.TLS.InsecureSkipVerify || c.TLS.ServerName != want {
			t.Fatalf("default TLS for addr %q server name %q is not verified for %q: %+v", addr, serverName, want, c.TLS)
		}
	})
}
