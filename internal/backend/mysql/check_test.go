package mysql

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// documentedGrants are the statements docs/operations.md gives for the
// admin account rekey connects as (its user names the account).
func documentedGrants(account string) []string {
	return []string{
		"GRANT CREATE USER, REPLICATION CLIENT, SYSTEM_VARIABLES_ADMIN, CONNECTION_ADMIN ON *.* TO " + account,
		"GRANT SELECT ON mysql.user TO " + account,
		"GRANT SELECT ON performance_schema.* TO " + account,
		// What rekey grants the users it creates, with the grant option.
		"GRANT SELECT, INSERT ON `chkdb`.* TO " + account + " WITH GRANT OPTION",
	}
}

func failedFindings(fs []engine.Finding) string {
	var out []string
	for _, f := range engine.Failed(fs) {
		out = append(out, engine.Short(f))
	}
	return strings.Join(out, "\n")
}

// TestDocumentedGrantsOnRealMySQL: an admin holding exactly the privileges
// the docs list passes every check and carries a whole rotation on a
// primary and a read-only replica (provision with grants, precheck, apply,
// discard); without SELECT on mysql.user on one instance, the check names
// that instance, the privilege and the GRANT that restores it, and
// nothing else.
func TestDocumentedGrantsOnRealMySQL(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{Replicas: 1})
	const admin, adminPw = "chk-admin", "chk-admin-password-0123456789"
	account := "'" + admin + "'@'%'"
	for _, i := range c.Instances() {
		unlogged(t, i, append([]string{"CREATE USER " + account + " IDENTIFIED BY '" + adminPw + "'"}, documentedGrants(account)...)...)
	}
	spec := &v1.MySQLSpec{Admin: v1.MySQLAdmin{User: admin}, Users: []v1.MySQLUser{
		{Name: "chkapp", Grants: []v1.MySQLGrant{{Privileges: []string{"SELECT", "INSERT"}, Object: "chkdb.*"}}}}}
	b, err := New(spec, clusterInstances(c), adminPw, caPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cur := engine.Secrets{"CHKAPP_PASSWORD": "chkapp-current-password-0123456789"}
	pending := engine.Secrets{"CHKAPP_PASSWORD": "chkapp-pending-password-0123456789"}
	fs := b.Check(ctx, engine.CheckInput{Current: cur})
	if f := failedFindings(fs); f != "" {
		t.Fatalf("the documented privileges fail the check:\n%s", f)
	}
	for _, f := range fs {
		t.Logf("%s %s: %s", f.Target, f.Check, f.Message)
	}
	if _, err := b.Provision(ctx, cur); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if err := b.Precheck(ctx, cur); err != nil {
		t.Fatalf("Precheck: %v", err)
	}
	if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if err := b.CheckDiscardHealth(ctx, cur, pending); err != nil {
		t.Fatalf("CheckDiscardHealth: %v", err)
	}
	if err := b.Retire(ctx, cur, pending); err != nil {
		t.Fatalf("Retire: %v", err)
	}
	for _, i := range c.Instances() {
		if err := i.CanLogin("chkapp", pending["CHKAPP_PASSWORD"]); err != nil {
			t.Fatalf("%s refuses the new password: %v", i.Name, err)
		}
		if err := i.CanLogin("chkapp", cur["CHKAPP_PASSWORD"]); err == nil {
			t.Fatalf("%s still accepts the old password", i.Name)
		}
	}

	replica := c.Replicas[0]
	unlogged(t, replica, "REVOKE SELECT ON mysql.user FROM "+account)
	fs = b.Check(ctx, engine.CheckInput{Current: pending})
	failed := engine.Failed(fs)
	if len(failed) != 1 {
		t.Fatalf("%d checks failed, want 1:\n%s", len(failed), failedFindings(fs))
	}
	f := failed[0]
	if f.Target != replica.Name || f.Check != "privileges" || !strings.Contains(f.Message, "lacks SELECT on mysql.user") ||
		f.Fix != "GRANT SELECT ON mysql.user TO "+account {
		t.Fatalf("finding %+v, want %s's missing SELECT on mysql.user and its GRANT", f, replica.Name)
	}
}

// TestTLSTrouble: what the check says of a certificate that does not
// verify; mysqld's own certificate is recognised without its names being
// repeated.
func TestTLSTrouble(t *testing.T) {
	auto := &x509.Certificate{Subject: pkix.Name{CommonName: "MySQL_Server_9.7.4_Auto_Generated_Server_Certificate"}}
	other := &x509.Certificate{Subject: pkix.Name{CommonName: "db.internal.example"}, DNSNames: []string{"db.internal.example"}}
	noSAN := &x509.Certificate{Subject: pkix.Name{CommonName: "db.internal.example"}}
	inst := Instance{Name: "db-0", Addr: "db-0.db:3306"}
	for _, tc := range []struct {
		name      string
		caRef     *v1.SecretKeyRef
		err       error
		msg, fix  []string
		notInText string
	}{
		{"mysqld's auto-generated certificate", nil, x509.UnknownAuthorityError{Cert: auto},
			[]string{"db-0 serves the certificate mysqld generates for itself"}, []string{"signed by a CA you keep", "spec.mysql.tlsCASecretRef", "spec.mysql.tls: SkipVerify", "pose as the server"}, "MySQL_Server"},
		{"a certificate without a SAN", nil, x509.HostnameError{Certificate: noSAN, Host: "db-0.db"},
			[]string{"holds no subject alternative name", "tlsServerName cannot help"}, []string{"signed by a CA you keep"}, "db.internal.example"},
		{"an unknown CA, no CA given", nil, x509.UnknownAuthorityError{Cert: other},
			[]string{"is not trusted (signed by an unknown authority)"}, []string{"create a Secret holding the CA certificate", "spec.mysql.tlsCASecretRef"}, "db.internal.example"},
		{"an unknown CA, the wrong CA given", &v1.SecretKeyRef{Name: "mysql-ca", Key: "ca.crt"}, x509.UnknownAuthorityError{Cert: other},
			[]string{"is not trusted"}, []string{"Secret mysql-ca key ca.crt (spec.mysql.tlsCASecretRef)"}, "db.internal.example"},
		{"another name", nil, x509.HostnameError{Certificate: other, Host: "db-0.db"},
			[]string{"is not valid for db-0.db"}, []string{"spec.mysql.tlsServerName"}, "db.internal.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Backend{transport: transport{mode: TLSRequired}, caRef: tc.caRef}
			msg, fix := b.tlsTrouble(inst, fmt.Errorf("dial: %w", tc.err))
			for _, w := range tc.msg {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			for _, w := range tc.fix {
				if !strings.Contains(fix, w) {
					t.Errorf("fix %q lacks %q", fix, w)
				}
			}
			if strings.Contains(msg+fix, tc.notInText) {
				t.Errorf("the certificate's own text %q is repeated: %q / %q", tc.notInText, msg, fix)
			}
		})
	}
}
