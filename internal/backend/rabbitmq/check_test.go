package rabbitmq

import (
	"context"
	"net"
	"strings"
	"testing"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// findingOf is the one finding of check in fs.
func findingOf(t *testing.T, fs []engine.Finding, check string) engine.Finding {
	t.Helper()
	for _, f := range fs {
		if f.Check == check {
			return f
		}
	}
	t.Fatalf("no %s finding in %+v", check, fs)
	return engine.Finding{}
}

// TestCheckOnRealBroker: the checks against a real broker: all pass for
// the broker's administrator; an admin with only the management tag is
// told the exact set_user_tags (keeping its tags); a vhost that does not
// exist, a closed port and an untrusted certificate are each named with
// their fix.
func TestCheckOnRealBroker(t *testing.T) {
	br := startBroker(t)
	ctx := context.Background()

	fs := br.backend(t, br.spec("chk")).Check(ctx, engine.CheckInput{})
	if failed := engine.Failed(fs); len(failed) > 0 {
		t.Fatalf("the broker's administrator fails checks: %+v", failed)
	}
	for _, f := range fs {
		t.Logf("%s %s: %s", f.Target, f.Check, f.Message)
	}

	br.putUser(t, "chk-mgmt", "chk-mgmt-password-0123456789", "management", "monitoring")
	b, err := New(br.spec("chk"), testOwner, "chk-mgmt", "chk-mgmt-password-0123456789", br.m.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	f := findingOf(t, b.Check(ctx, engine.CheckInput{}), "tags")
	if f.OK || !strings.Contains(f.Message, "lacks the administrator tag") || f.Fix != "rabbitmqctl set_user_tags chk-mgmt administrator management monitoring" {
		t.Fatalf("tags finding %+v", f)
	}

	spec := br.spec("chk")
	spec.User.Permissions[1].Vhost = "nosuch"
	f = findingOf(t, br.backend(t, spec).Check(ctx, engine.CheckInput{}), "vhost nosuch")
	if f.OK || f.Fix != "create it (rabbitmqctl add_vhost nosuch), or correct spec.rabbitmq.user.permissions" {
		t.Fatalf("vhost finding %+v", f)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	spec = br.spec("chk")
	spec.Endpoint = "https://" + closed
	fs = br.backend(t, spec).Check(ctx, engine.CheckInput{})
	if len(fs) != 1 || fs[0].OK || !fs[0].Deferred || !strings.Contains(fs[0].Message, "nothing listens on https://"+closed) {
		t.Fatalf("closed port: %+v", fs)
	}

	other, err := testenv.OtherCAPEM()
	if err != nil {
		t.Fatal(err)
	}
	b, err = New(br.spec("chk"), testOwner, br.m.AdminUser, br.m.AdminPassword, other)
	if err != nil {
		t.Fatal(err)
	}
	f = findingOf(t, b.Check(ctx, engine.CheckInput{}), "tls")
	if f.OK || !strings.Contains(f.Message, "signed by an unknown authority") || !strings.Contains(f.Fix, "spec.rabbitmq.tls.caSecretRef") {
		t.Fatalf("tls finding %+v", f)
	}
}

// TestTagFinding: the fix keeps the admin's tags, repeating only
// RabbitMQ's own: any other text the endpoint answered stays out.
func TestTagFinding(t *testing.T) {
	b := &Backend{endpoint: "https://mq:15671", adminUser: "ops"}
	for _, tc := range []struct {
		tags []string
		ok   bool
		fix  string
	}{
		{[]string{"administrator"}, true, ""},
		{nil, false, "rabbitmqctl set_user_tags ops administrator"},
		{[]string{"management", "monitoring"}, false, "rabbitmqctl set_user_tags ops administrator management monitoring"},
		{[]string{"management", "CANARY-only-the-endpoint-said-this"}, false, "rabbitmqctl set_user_tags ops administrator management <its other tags>"},
	} {
		f := b.tagFinding(tc.tags)
		if f.OK != tc.ok || f.Fix != tc.fix {
			t.Errorf("tags %v: ok %v fix %q, want %v %q", tc.tags, f.OK, f.Fix, tc.ok, tc.fix)
		}
	}
}
