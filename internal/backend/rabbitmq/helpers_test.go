package rabbitmq

import (
	"context"
	"slices"
	"strings"
	"testing"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// broker is one real node shared by the subtests of a test; each subtest
// works on users of its own base, so they run in parallel.
type broker struct {
	m     *testenv.RabbitMQ
	admin *rabbithole.Client
}

func startBroker(t *testing.T) *broker {
	m := testenv.RabbitMQForTest(t)
	br := &broker{m: m, admin: m.Client()}
	br.do(t, "create vhost prod", drain(br.admin.PutVhost("prod", rabbithole.VhostSettings{})))
	return br
}

func (br *broker) do(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// spec uses a PCRE-only pattern on purpose: the broker must take it as
// rekey passes it. The endpoint is https, verified against the node's CA
// (backend passes it as tls.caSecretRef's content).
func (br *broker) spec(base string) *v1.RabbitMQSpec {
	return &v1.RabbitMQSpec{Endpoint: br.m.MgmtURL, User: v1.RabbitMQUser{
		Base: base,
		Permissions: []v1.RabbitMQPermission{
			{Vhost: "/", Configure: `^(?!amq\.).*`, Write: ".*", Read: ".*"},
			{Vhost: "prod", Configure: "", Write: `^app\.`, Read: ".*"},
		},
		TopicPermissions: []v1.RabbitMQTopicPermission{{Vhost: "/", Exchange: "amq.topic", Write: `^nova\.`, Read: ".*"}},
	}}
}

func (br *broker) backend(t *testing.T, spec *v1.RabbitMQSpec) *Backend {
	t.Helper()
	return br.backendOf(t, spec, testOwner)
}

// backendOf is the backend of the set whose UID is owner.
func (br *broker) backendOf(t *testing.T, spec *v1.RabbitMQSpec, owner string) *Backend {
	t.Helper()
	b, err := New(spec, owner, br.m.AdminUser, br.m.AdminPassword, br.m.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// putUser makes a user behind rekey's back.
func (br *broker) putUser(t *testing.T, name, password string, tags ...string) {
	t.Helper()
	br.do(t, "put user "+name, drain(br.admin.PutUser(name, rabbithole.UserSettings{Password: password, Tags: append(rabbithole.UserTags{}, tags...)})))
}

// putOwned makes a user as the set whose UID is owner would have: an
// orphan of an interrupted rotation, or another set's generation.
func (br *broker) putOwned(t *testing.T, owner, name, password string) {
	t.Helper()
	br.putUser(t, name, password, OwnerTag(owner))
}

// repassword changes a user's password by hand and keeps its tags, as
// rabbitmqctl change_password does.
func (br *broker) repassword(t *testing.T, name, password string) {
	t.Helper()
	u, err := br.admin.GetUser(name)
	br.do(t, "get user "+name, err)
	br.putUser(t, name, password, u.Tags...)
}

func (br *broker) exists(t *testing.T, name string) bool {
	t.Helper()
	_, err := br.admin.GetUser(name)
	if err != nil && !isNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// login asserts what a consumer sees over AMQP and what the backend's own
// check says agree with want.
func (br *broker) login(t *testing.T, b *Backend, user, password string, want bool) {
	t.Helper()
	if err := br.m.CanAuthenticate(user, password); (err == nil) != want {
		t.Errorf("AMQP login as %s: ok=%v, want %v (%v)", user, err == nil, want, err)
	}
	ok, err := b.authenticates(context.Background(), user, password)
	if err != nil || ok != want {
		t.Errorf("backend's check of %s: %v, %v; want %v", user, ok, err, want)
	}
}

// state is a user as the broker holds it, sorted for comparison.
type state struct {
	tags   []string
	perms  []string // vhost configure write read
	topics []string // vhost exchange write read
}

func (br *broker) state(t *testing.T, name string) state {
	t.Helper()
	u, err := br.admin.GetUser(name)
	br.do(t, "get user "+name, err)
	perms, err := br.admin.ListPermissionsOf(name)
	br.do(t, "permissions of "+name, err)
	topics, err := br.admin.ListTopicPermissionsOf(name)
	br.do(t, "topic permissions of "+name, err)
	var s state
	for _, tag := range u.Tags {
		if tag != "" {
			s.tags = append(s.tags, tag)
		}
	}
	for _, p := range perms {
		s.perms = append(s.perms, strings.Join([]string{p.Vhost, p.Configure, p.Write, p.Read}, " "))
	}
	for _, p := range topics {
		s.topics = append(s.topics, strings.Join([]string{p.Vhost, p.Exchange, p.Write, p.Read}, " "))
	}
	slices.Sort(s.tags)
	slices.Sort(s.perms)
	slices.Sort(s.topics)
	return s
}

// specState is what a user rekey made for spec holds: the spec's tags and
// rekey's mark of ownership, and the spec's permissions.
func specState(spec *v1.RabbitMQSpec) state {
	var s state
	s.tags = slices.Sorted(slices.Values(append(slices.Clone(spec.User.Tags), OwnerTag(testOwner))))
	for _, p := range spec.User.Permissions {
		s.perms = append(s.perms, strings.Join([]string{p.Vhost, p.Configure, p.Write, p.Read}, " "))
	}
	for _, p := range spec.User.TopicPermissions {
		s.topics = append(s.topics, strings.Join([]string{p.Vhost, p.Exchange, p.Write, p.Read}, " "))
	}
	slices.Sort(s.perms)
	slices.Sort(s.topics)
	return s
}

func (br *broker) exact(t *testing.T, name string, spec *v1.RabbitMQSpec) {
	t.Helper()
	got, want := br.state(t, name), specState(spec)
	if !slices.Equal(got.tags, want.tags) || !slices.Equal(got.perms, want.perms) || !slices.Equal(got.topics, want.topics) {
		t.Errorf("user %s holds\n  %+v\nwant\n  %+v", name, got, want)
	}
}

// refused asserts err is a refusal for reason that names what, and holds
// none of the passwords.
func refused(t *testing.T, err error, reason string, what string, passwords ...string) {
	t.Helper()
	r, ok := engine.AsRefusal(err)
	if !ok {
		t.Fatalf("want a %s refusal, got %v", reason, err)
	}
	if r.Reason != reason || !strings.Contains(r.Message, what) {
		t.Errorf("refusal %v: want reason %s naming %q", r, reason, what)
	}
	noSecret(t, err, passwords...)
}

func noSecret(t *testing.T, err error, passwords ...string) {
	t.Helper()
	for _, p := range passwords {
		if err != nil && p != "" && strings.Contains(err.Error(), p) {
			t.Errorf("error holds a password: %v", err)
		}
	}
}

func gen(t *testing.T, b *Backend, n int64) engine.Secrets {
	t.Helper()
	s, err := b.NewSecrets(n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func permissions(all string) rabbithole.Permissions {
	return rabbithole.Permissions{Configure: all, Write: all, Read: all}
}

func topicPermission(exchange string) rabbithole.TopicPermissions {
	return rabbithole.TopicPermissions{Exchange: exchange, Write: ".*", Read: ".*"}
}
