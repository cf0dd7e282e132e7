package testenv

import (
	"net/http"
	"strings"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
)

func TestRabbitMQSmoke(t *testing.T) {
	var stopping time.Time
	t.Cleanup(func() { t.Logf("stopped in %s", time.Since(stopping).Round(time.Millisecond)) })
	start := time.Now()
	m := RabbitMQForTest(t)
	t.Cleanup(func() { stopping = time.Now() }) // cleanups run last first: just before m.Stop
	t.Logf("RabbitMQ %s: node %s started in %s", m.Version, m.NodeName, time.Since(start).Round(time.Millisecond))

	if err := m.CanAuthenticate(m.AdminUser, m.AdminPassword); err != nil {
		t.Fatalf("admin: %v", err)
	}
	c := m.Client()
	user, password := "rekey-smoke", randHex(12)
	// management: the HTTP API (whoami below) admits only tagged users;
	// AMQP logins need no tag.
	res, err := c.PutUser(user, rabbithole.UserSettings{Password: password, Tags: rabbithole.UserTags{"management"}})
	if err != nil {
		t.Fatalf("put user: %v", err)
	}
	res.Body.Close()
	res, err = c.UpdatePermissionsIn("/", user, rabbithole.Permissions{Configure: ".*", Write: ".*", Read: ".*"})
	if err != nil {
		t.Fatalf("permissions: %v", err)
	}
	res.Body.Close()

	if err := m.CanAuthenticate(user, password); err != nil {
		t.Fatalf("new user cannot authenticate: %v", err)
	}
	if err := m.CanOpenVhost(user, password, "/"); err != nil {
		t.Fatalf("new user cannot open /: %v", err)
	}
	if err := m.CanAuthenticateTLS(user, password); err != nil {
		t.Fatalf("new user cannot authenticate over AMQPS: %v", err)
	}
	who, err := m.ClientAs(user, password).Whoami()
	if err != nil {
		t.Fatalf("whoami as new user over https: %v", err)
	}
	// The plain http listener serves the same API, for the plaintext
	// opt-in's tests.
	pc, err := rabbithole.NewClient(m.MgmtHTTPURL, user, password)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Whoami(); err != nil {
		t.Fatalf("whoami as new user over http: %v", err)
	}
	// https is verified against the node's own CA and nothing else: a
	// client with only the system roots refuses the certificate.
	sys, err := rabbithole.NewTLSClient(m.MgmtURL, user, password, &http.Transport{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Whoami(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("https with the system roots only: want a certificate error, got %v", err)
	}
	t.Logf("authenticated over AMQP, AMQPS, https and http as %s (tags %v)", who.Name, who.Tags)

	err = m.CanAuthenticate(user, password+"x")
	if err == nil {
		t.Fatal("wrong password accepted")
	}
	t.Logf("wrong password: %v", err)
	if err := m.CanOpenVhost(user, password, "no-such-vhost"); err == nil {
		t.Fatal("opened a vhost that does not exist")
	}

	res, err = c.DeleteUser(user)
	if err != nil {
		t.Fatalf("delete user: %v", err)
	}
	res.Body.Close()
	err = m.CanAuthenticate(user, password)
	if err == nil {
		t.Fatal("deleted user can still authenticate")
	}
	t.Logf("deleted user: %v", err)
}
