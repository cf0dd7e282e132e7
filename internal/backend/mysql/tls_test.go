package mysql

import (
	"context"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// caPEM is the CA that signed the harness's servers' certificates.
func caPEM(t testing.TB) []byte {
	t.Helper()
	ca, err := testenv.MySQLCAPEM()
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func clusterInstances(c *testenv.MySQLCluster) []Instance {
	var insts []Instance
	for _, i := range c.Instances() {
		insts = append(insts, Instance{Name: i.Name, Addr: i.Addr()})
	}
	return insts
}

// TestTLSAgainstRealMySQL: the harness's mysqld serves a certificate of the
// test CA. Verified TLS (the default) works with that CA, for each
// instance's own host or a fixed server name; a wrong CA or a name the
// certificate does not hold are refused in the TLS handshake, before any
// credential is sent, with errors that say what to fix and hold no
// password; the unverified modes still connect and are reported.
func TestTLSAgainstRealMySQL(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{NoReplicas: true})
	insts := clusterInstances(c)
	other, err := testenv.OtherCAPEM()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const adminPw = testenv.EnvPassword
	newBackend := func(t *testing.T, mode, serverName string, ca []byte, insts []Instance) *Backend {
		t.Helper()
		spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: testenv.EnvUser}, Users: []v1.MySQLUser{{Name: "tlsuser"}},
			TLS: mode, TLSServerName: serverName}
		b, err := New(spec, insts, adminPw, ca)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	works := func(t *testing.T, b *Backend) {
		t.Helper()
		v, err := b.Version(ctx, nil)
		if err != nil {
			t.Fatalf("Version: %v", err)
		}
		if err := checkLogin(ctx, b.transport, b.Instances[0], testenv.EnvUser, adminPw); err != nil {
			t.Fatalf("checkLogin: %v", err)
		}
		t.Logf("connected (mysqld %s); InsecureTransport=%q", v, b.InsecureTransport())
	}
	refused := func(t *testing.T, b *Backend, want ...string) {
		t.Helper()
		_, err := b.Version(ctx, nil)
		if err == nil {
			t.Fatal("connected; want the server refused by TLS verification")
		}
		// A refusal that says what to fix, as a Warning and the Degraded
		// condition; not "unreachable", which would say to wait.
		if rf, ok := engine.AsRefusal(err); !ok || rf.Reason != string(reason.BackendError) {
			t.Errorf("error is not a BackendError refusal: %T %v", err, err)
		}
		s, perr := openSession(ctx, "test", true, nil, b.Instances[0], b.transport, b.AdminUser, adminPw)
		if perr == nil {
			s.close(ctx)
			t.Fatal("session opened; want refused")
		}
		lerr := checkLogin(ctx, b.transport, b.Instances[0], "tlsuser", "login-password-never-shown")
		if lerr == nil {
			t.Fatal("checkLogin succeeded; want refused")
		}
		if _, ok := engine.AsRefusal(lerr); !ok || isLoginRefused(lerr) {
			// A TLS failure must not read as "refuses the password":
			// Verify would call that PendingRejected.
			t.Errorf("checkLogin error is not a refusal about TLS: %v", lerr)
		}
		verr := b.Verify(ctx, engine.Secrets{"TLSUSER_PASSWORD": "login-password-never-shown"})
		if rf, ok := engine.AsRefusal(verr); !ok || rf.Reason != string(reason.BackendError) {
			t.Errorf("Verify over an unverified connection: %v, want the TLS refusal (never PendingRejected)", verr)
		}
		for _, e := range []error{err, perr, lerr, verr} {
			msg := e.Error()
			for _, w := range want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, adminPw) || strings.Contains(msg, "login-password-never-shown") {
				t.Fatalf("error holds a password: %q", msg)
			}
		}
		t.Logf("refused: %v", err)
	}

	t.Run("Required with the CA, each instance's host", func(t *testing.T) {
		b := newBackend(t, "", "", caPEM(t), insts)
		if b.transport.mode != TLSRequired {
			t.Fatalf("default mode %q, want Required", b.transport.mode)
		}
		works(t, b)
		if msg := b.InsecureTransport(); msg != "" {
			t.Fatalf("verified TLS reported insecure: %q", msg)
		}
	})
	t.Run("Required with the CA and a fixed server name", func(t *testing.T) {
		// Dialled at 127.0.0.1 under another DNS name, as a StatefulSet's
		// pods are: verified for the one name the certificate holds.
		mapped := []Instance{{Name: "db-0", Addr: insts[0].Addr, ServerName: "db-0.db.shop.svc"}}
		works(t, newBackend(t, TLSRequired, testenv.MySQLTLSName, caPEM(t), mapped))
		refused(t, newBackend(t, TLSRequired, "", caPEM(t), mapped), "not valid for", "db-0.db.shop.svc", "spec.mysql.tlsServerName")
	})
	t.Run("a wrong CA is refused", func(t *testing.T) {
		refused(t, newBackend(t, TLSRequired, "", other, insts), "not trusted", "spec.mysql.tlsCASecretRef", "put the right CA there")
	})
	t.Run("no CA: the system roots do not know the test CA", func(t *testing.T) {
		refused(t, newBackend(t, TLSRequired, "", nil, insts), "not trusted", "spec.mysql.tlsCASecretRef")
	})
	t.Run("a server name the certificate does not hold is refused", func(t *testing.T) {
		refused(t, newBackend(t, TLSRequired, "mysql.example.org", caPEM(t), insts), "not valid for", "mysql.example.org", "spec.mysql.tlsServerName")
	})
	for _, mode := range []string{TLSSkipVerify, TLSPreferred, TLSDisabled} {
		t.Run(mode+" still connects and is reported", func(t *testing.T) {
			b := newBackend(t, mode, "", nil, insts)
			works(t, b)
			msg := b.InsecureTransport()
			if !strings.Contains(msg, "spec.mysql.tls is "+mode) || !strings.Contains(msg, "set spec.mysql.tls to Required") {
				t.Fatalf("InsecureTransport() = %q, want it to name spec.mysql.tls and the fix", msg)
			}
		})
	}
	t.Run("Disabled really is plaintext, Required really is TLS", func(t *testing.T) {
		for mode, ca := range map[string][]byte{TLSDisabled: nil, TLSRequired: caPEM(t)} {
			b := newBackend(t, mode, "", ca, insts)
			s, err := openSession(ctx, "test", true, nil, b.Instances[0], b.transport, b.AdminUser, adminPw)
			if err != nil {
				t.Fatal(err)
			}
			var name, cipher string
			err = s.conn.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher)
			s.close(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if (cipher != "") != (ca != nil) {
				t.Fatalf("%s: Ssl_cipher=%q", mode, cipher)
			}
		}
	})
}

// TestTLSSpecRefusals: New re-checks every TLS field and address whatever
// admission let through, and says which field to fix.
func TestTLSSpecRefusals(t *testing.T) {
	base := func() *v1.MySQLSpec {
		return &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: "admin"}, Users: []v1.MySQLUser{{Name: "app"}}}
	}
	insts := []Instance{{Name: "db-0", Addr: "db-0.db.ns.svc:3306"}}
	cases := []struct {
		name  string
		edit  func(*v1.MySQLSpec)
		ca    []byte
		insts []Instance
		want  string
	}{
		{"CA that is not PEM", nil, []byte("not a certificate"), insts, "holds no PEM certificate"},
		{"CA with SkipVerify", func(s *v1.MySQLSpec) { s.TLS = TLSSkipVerify }, []byte("x"), insts, "only apply to tls: Required"},
		{"server name with Disabled", func(s *v1.MySQLSpec) { s.TLS = TLSDisabled; s.TLSServerName = "db" }, nil, insts, "only apply to tls: Required"},
		{"unknown mode", func(s *v1.MySQLSpec) { s.TLS = "true" }, nil, insts, `mysql.tls "true"`},
		{"server name with a slash", func(s *v1.MySQLSpec) { s.TLSServerName = "a/b" }, nil, insts, "tlsServerName"},
		{"address with DSN syntax", nil, nil, []Instance{{Name: "x", Addr: "db:3306)/?allowAllFiles=true"}}, "is not host:port"},
		{"port out of range", nil, nil, []Instance{{Name: "x", Addr: "db:70000"}}, "between 1 and 65535"},
		{"service name smuggling an option", nil, nil, []Instance{{Name: "x", Addr: "db-0.a)/x?tls=false.ns.svc:3306"}}, "is not host:port"},
		{"bad admin name", func(s *v1.MySQLSpec) { s.Admin.User = "root@evil:1" }, nil, insts, "admin user"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := base()
			if c.edit != nil {
				c.edit(spec)
			}
			_, err := New(spec, c.insts, "admin-password", c.ca)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), "admin-password") {
				t.Fatalf("error holds the password: %v", err)
			}
		})
	}
}
