package plugin

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestShowPrintsCredentialFromDistributionSecret(t *testing.T) {
	ns := namespace(t)
	cs := hostsSet(ns, "orders")
	cs.Spec.MySQL.Users = append(cs.Spec.MySQL.Users, v1.MySQLUser{Name: "billing.app"}, v1.MySQLUser{Name: "ledger", SecretKey: "LEDGER_PW"})
	create(t, cs)
	setStatus(t, ns, "orders", idle(1))
	if err := k8s.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-db"},
		Data: map[string][]byte{
			"ORDERS_PASSWORD":      []byte("Abc123xyz"),
			"BILLING_APP_PASSWORD": []byte(`it's "#1"`),
			"LEDGER_PW":            []byte("l3dger"),
		},
	}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--user", "orders"}, "Abc123xyz\n"},
		{[]string{"--user", "orders@%", "--format", "plain"}, "Abc123xyz\n"},
		{[]string{"--user", "orders", "--format", "mycnf"}, "[client]\nuser=orders\npassword=Abc123xyz\n"},
		{[]string{"--user", "orders", "--format", "env"}, "MYSQL_USER=orders\nMYSQL_PASSWORD=Abc123xyz\n"},
		{[]string{"--user", "ledger"}, "l3dger\n"},
		{[]string{"--user", "billing.app", "--format", "env"}, "MYSQL_USER=billing.app\nMYSQL_PASSWORD='it'\\''s \"#1\"'\n"},
	} {
		out, errOut, err := kubectl(t, ns, append([]string{"show", "orders"}, c.args...)...)
		if err != nil || out != c.want || errOut != "" {
			t.Errorf("show %v: %v, stdout %q, stderr %q; want stdout %q", c.args, err, out, errOut, c.want)
		}
	}

	mustFail(t, ns, `credentialset "orders" has 3 users: choose one with --user (orders@%, billing.app@%, ledger@%)`, "show", "orders")
	mustFail(t, ns, `credentialset "orders" has no user "root": use one of orders@%, billing.app@%, ledger@%`, "show", "orders", "--user", "root")
	mustFail(t, ns, `unknown format "json": use plain, mycnf or env`, "show", "orders", "--user", "orders", "--format", "json")
	mustFail(t, ns, "cannot hold reliably", "show", "orders", "--user", "billing.app", "--format", "mycnf")

	// During a rotation the Secret holds the new password; stdout stays clean.
	setStatus(t, ns, "orders", distributed("r-7"))
	out, errOut, err := kubectl(t, ns, "show", "orders", "--user", "orders")
	if err != nil || out != "Abc123xyz\n" || !strings.Contains(errOut, "rotation r-7 is active") {
		t.Fatalf("show during rotation: %v, stdout %q, stderr %q", err, out, errOut)
	}
}

func TestShowRefusals(t *testing.T) {
	ns := namespace(t)
	cs := hostsSet(ns, "nodist")
	cs.Spec.Distribution = nil
	create(t, cs)
	mustFail(t, ns, `credentialset "nodist" has no distribution target`, "show", "nodist")

	create(t, hostsSet(ns, "fresh"))
	mustFail(t, ns, "distribution Secret "+ns+"/fresh-db does not exist yet", "show", "fresh")
	if err := k8s.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh-db"}, Data: map[string][]byte{"OTHER": []byte("x")},
	}); err != nil {
		t.Fatal(err)
	}
	mustFail(t, ns, "has no key ORDERS_PASSWORD for user orders@%", "show", "fresh")
}

func TestShellQuote(t *testing.T) {
	for _, c := range []struct{ in, shell string }{
		{"plain0K", "plain0K"},
		{"has space", "'has space'"},
		{" lead", "' lead'"},
		{"a#b", "'a#b'"},
		{`say "hi"`, `'say "hi"'`},
		{`back\slash`, `'back\slash'`},
		{"new\nline", "'new\nline'"},
		{"", "''"},
	} {
		if got := shellQuote(c.in); got != c.shell {
			t.Errorf("shellQuote(%q) = %q, want %q", c.in, got, c.shell)
		}
	}
}
