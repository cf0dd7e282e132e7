package testenv

import (
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
	uc, err := rabbithole.NewClient(m.MgmtURL, user, password)
	if err != nil {
		t.Fatal(err)
	}
	who, err := uc.Whoami()
	if err != nil {
		t.Fatalf("whoami as new user: %v", err)
	}
	t.Logf("authenticated over AMQP and HTTP as %s (tags %v)", who.Name, who.Tags)

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
