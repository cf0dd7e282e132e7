package rabbitmq

import (
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

const testAdminPassword = "admin-Secret-Value-0123456789"

// testOwner stands for a CredentialSet's UID.
const testOwner = "0b5c6e1a-4f7d-4c2e-9a51-3d8e2f6b7c90"

func validSpec() *v1.RabbitMQSpec {
	return &v1.RabbitMQSpec{
		Endpoint: "https://rabbitmq.ns.svc:15671",
		User: v1.RabbitMQUser{Base: "nova", Permissions: []v1.RabbitMQPermission{
			{Vhost: "/", Configure: ".*", Write: ".*", Read: ".*"},
		}},
	}
}

// What admission cannot check must fail in New, naming the field and the
// fix, and never quoting the admin password.
func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1.RabbitMQSpec)
		ca     []byte
		want   []string // substrings of the error
	}{
		{"configure is not a regex", func(s *v1.RabbitMQSpec) { s.User.Permissions[0].Configure = "(" },
			nil, []string{`permissions[vhost "/"].configure`, `"("`, "missing closing )", "fix the pattern"}},
		{"read has an unopened paren", func(s *v1.RabbitMQSpec) { s.User.Permissions[0].Read = "a)" },
			nil, []string{`permissions[vhost "/"].read`, "unexpected )"}},
		{"write has an open class", func(s *v1.RabbitMQSpec) { s.User.Permissions[0].Write = "[a-" },
			nil, []string{`.write "[a-"`, "missing closing ]"}},
		{"topic write trails a backslash", func(s *v1.RabbitMQSpec) {
			s.User.TopicPermissions = []v1.RabbitMQTopicPermission{{Vhost: "/", Exchange: "amq.topic", Write: `nova\`, Read: ".*"}}
		}, nil, []string{`topicPermissions[vhost "/", exchange "amq.topic"].write`, "trailing backslash"}},
		{"topic read repeats nothing", func(s *v1.RabbitMQSpec) {
			s.User.TopicPermissions = []v1.RabbitMQTopicPermission{{Vhost: "/", Exchange: "x", Write: "", Read: "*a"}}
		}, nil, []string{`exchange "x"].read`, "missing argument to repetition operator"}},
		{"endpoint with a path", func(s *v1.RabbitMQSpec) { s.Endpoint = "http://h:15672/api" }, nil, []string{"rabbitmq.endpoint", "only scheme, host and port"}},
		{"endpoint with credentials", func(s *v1.RabbitMQSpec) { s.Endpoint = "http://u:p@h:15672" }, nil, []string{"rabbitmq.endpoint"}},
		{"endpoint scheme", func(s *v1.RabbitMQSpec) { s.Endpoint = "amqp://h:5672" }, nil, []string{"scheme must be https (or http with allowPlaintextHTTP)"}},
		{"http without the opt-in", func(s *v1.RabbitMQSpec) { s.Endpoint = "http://h:15672" }, nil, []string{"unencrypted", "spec.rabbitmq.allowPlaintextHTTP: true"}},
		{"opt-in with https", func(s *v1.RabbitMQSpec) { s.AllowPlaintextHTTP = true }, nil, []string{"allowPlaintextHTTP applies only to an http:// endpoint"}},
		{"tls with http", func(s *v1.RabbitMQSpec) {
			s.Endpoint, s.AllowPlaintextHTTP, s.TLS = "http://h:15672", true, &v1.RabbitMQTLS{InsecureSkipVerify: true}
		}, nil, []string{"rabbitmq.tls applies only to an https:// endpoint"}},
		{"a tag of rekey's", func(s *v1.RabbitMQSpec) { s.User.Tags = []string{"management", "rekey-owner-x"} }, nil, []string{"rabbitmq.user.tags", "reserved"}},
		{"a tag with a comma", func(s *v1.RabbitMQSpec) { s.User.Tags = []string{"management,administrator"} }, nil, []string{"rabbitmq.user.tags"}},
		{"amqps with ssl off", func(s *v1.RabbitMQSpec) {
			s.TransportURL = &v1.RabbitMQTransportURL{Scheme: "amqps", Hosts: []string{"h:5671"}, Query: "heartbeat=10&ssl=0"}
		}, nil, []string{"transportURL.scheme amqps means TLS", "ssl=0"}},
		{"unknown transport scheme", func(s *v1.RabbitMQSpec) {
			s.TransportURL = &v1.RabbitMQTransportURL{Scheme: "http", Hosts: []string{"h:5671"}}
		}, nil, []string{"transportURL.scheme", "rabbit, amqp or amqps"}},
		{"endpoint does not parse", func(s *v1.RabbitMQSpec) { s.Endpoint = "http://h:port" }, nil, []string{"does not parse"}},
		{"base ends like a generation", func(s *v1.RabbitMQSpec) { s.User.Base = "nova-g2" }, nil, []string{"user.base", "-g<number>"}},
		{"empty base", func(s *v1.RabbitMQSpec) { s.User.Base = "" }, nil, []string{"user.base"}},
		{"configFile without transportURL", func(s *v1.RabbitMQSpec) { s.ConfigFile = &v1.RabbitMQConfigFile{Key: "nova.conf"} },
			nil, []string{"set rabbitmq.transportURL too"}},
		{"transport_url under the password key", func(s *v1.RabbitMQSpec) {
			s.TransportURL = &v1.RabbitMQTransportURL{Hosts: []string{"h:5672"}, Key: "password"}
		}, nil, []string{`key "password"`, "transportURL.key"}},
		{"config file under the transport_url key", func(s *v1.RabbitMQSpec) {
			s.TransportURL = &v1.RabbitMQTransportURL{Hosts: []string{"h:5672"}}
			s.ConfigFile = &v1.RabbitMQConfigFile{Key: "transport_url"}
		}, nil, []string{"configFile.key", "transportURL.key"}},
		{"no hosts", func(s *v1.RabbitMQSpec) { s.TransportURL = &v1.RabbitMQTransportURL{} }, nil, []string{"transportURL.hosts"}},
		{"CA that is no PEM", func(s *v1.RabbitMQSpec) { s.Endpoint = "https://h:15671" }, []byte("not a certificate"), []string{"caSecretRef holds no PEM"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := validSpec()
			tc.mutate(spec)
			_, err := New(spec, testOwner, "admin", testAdminPassword, tc.ca)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), testAdminPassword) {
				t.Errorf("error quotes the admin password: %v", err)
			}
		})
	}
}

// PCRE patterns RE2 cannot compile are the broker's to judge; rejecting
// them would refuse ordinary RabbitMQ permissions such as "anything but
// amq.*". The real broker's verdict is tested in broker_test.go.
func TestNewAcceptsPCREOnlyPatterns(t *testing.T) {
	for _, expr := range []string{
		"", ".*", `^(?!amq\.).*`, `^(?<!x)y`, `(a)\1`, `a*+`, `(?>ab)`, `(*UTF8)^x$`, `^nova\.(compute|scheduler)$`, `[[:alpha:]]+`, `a{1001}`,
	} {
		spec := validSpec()
		spec.User.Permissions[0].Configure = expr
		spec.User.TopicPermissions = []v1.RabbitMQTopicPermission{{Vhost: "/", Exchange: "amq.topic", Write: expr, Read: expr}}
		if _, err := New(spec, testOwner, "admin", testAdminPassword, nil); err != nil {
			t.Errorf("%q refused: %v", expr, err)
		}
	}
}

func TestNewNormalisesEndpointAndRefusesEmptyAdmin(t *testing.T) {
	spec := validSpec()
	spec.Endpoint = "https://rabbitmq.ns.svc:15671/"
	b, err := New(spec, testOwner, "admin", "pw", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Endpoint() != "https://rabbitmq.ns.svc:15671" {
		t.Errorf("endpoint %q keeps its slash: rabbit-hole would ask for //api/", b.Endpoint())
	}
	if _, err := New(validSpec(), testOwner, "admin", "", nil); err == nil || !strings.Contains(err.Error(), "admin Secret") {
		t.Errorf("empty admin password: %v", err)
	}
}

// The owner marker becomes a tag: a UID is accepted, anything that could
// split into several tags or be empty is not.
func TestNewRejectsOwner(t *testing.T) {
	for _, owner := range []string{"", "a,administrator", "a b", "-x", "x\n", strings.Repeat("a", 129)} {
		if _, err := New(validSpec(), owner, "admin", testAdminPassword, nil); err == nil || !strings.Contains(err.Error(), "owner marker") {
			t.Errorf("owner %q: %v", owner, err)
		}
	}
	b, err := New(validSpec(), testOwner, "admin", testAdminPassword, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.userTags(); len(got) != 1 || got[0] != "rekey-owner-"+testOwner {
		t.Errorf("tags of a user rekey creates: %q", got)
	}
}

// InsecureTransport names the field that turned verification off, and
// says nothing for verified https.
func TestInsecureTransport(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1.RabbitMQSpec)
		want   []string // empty: verified
	}{
		{"https with the system roots", func(*v1.RabbitMQSpec) {}, nil},
		{"https with a CA", func(s *v1.RabbitMQSpec) {
			s.TLS = &v1.RabbitMQTLS{CASecretRef: &v1.SecretKeyRef{Name: "ca", Key: "ca.crt"}}
		}, nil},
		{"https without verification", func(s *v1.RabbitMQSpec) { s.TLS = &v1.RabbitMQTLS{InsecureSkipVerify: true} },
			[]string{"spec.rabbitmq.tls.insecureSkipVerify is true", "https://rabbitmq.ns.svc:15671", "spec.rabbitmq.tls.caSecretRef"}},
		{"plaintext by opt-in", func(s *v1.RabbitMQSpec) { s.Endpoint, s.AllowPlaintextHTTP = "http://rabbitmq.ns.svc:15672", true },
			[]string{"spec.rabbitmq.allowPlaintextHTTP is true", "unencrypted", "https://"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := validSpec()
			tc.mutate(spec)
			b, err := New(spec, testOwner, "admin", testAdminPassword, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := b.InsecureTransport()
			if (got == "") != (len(tc.want) == 0) {
				t.Fatalf("InsecureTransport() = %q", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q does not say %q", got, w)
				}
			}
			if strings.Contains(got, testAdminPassword) {
				t.Errorf("%q holds the admin password", got)
			}
		})
	}
}

func TestGenerationOf(t *testing.T) {
	for _, tc := range []struct {
		base, name string
		gen        int64
		ok         bool
	}{
		{"nova", "nova-g1", 1, true},
		{"nova", "nova-g42", 42, true},
		{"nova", "nova-g9223372036854775807", 9223372036854775807, true},
		{"nova", "nova", 0, false},
		{"nova", "nova-g0", 0, false},
		{"nova", "nova-g01", 0, false},
		{"nova", "nova-g+1", 0, false},
		{"nova", "nova-g-1", 0, false},
		{"nova", "nova-g1x", 0, false},
		{"nova", "nova-g", 0, false},
		{"nova", "nova-g99999999999999999999", 0, false},
		{"nova", "nova-cell1-g1", 0, false},
		{"nova-cell1", "nova-g1", 0, false},
		{"a.b", "aXb-g1", 0, false}, // the base is no pattern
	} {
		gen, ok := generationOf(tc.base, tc.name)
		if gen != tc.gen || ok != tc.ok {
			t.Errorf("generationOf(%q, %q) = %d, %v; want %d, %v", tc.base, tc.name, gen, ok, tc.gen, tc.ok)
		}
	}
}

func TestNewSecrets(t *testing.T) {
	b, err := New(validSpec(), testOwner, "admin", "pw", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.NewSecrets(3)
	if err != nil {
		t.Fatal(err)
	}
	if s[KeyUsername] != "nova-g3" || len(s[KeyPassword]) < 32 || len(s) != 2 {
		t.Errorf("NewSecrets(3) = user %q, %d-char password, %d keys", s[KeyUsername], len(s[KeyPassword]), len(s))
	}
	if again, _ := b.NewSecrets(3); again[KeyPassword] == s[KeyPassword] {
		t.Error("two calls minted the same password")
	}
	if _, err := b.NewSecrets(0); err == nil {
		t.Error("generation 0 accepted")
	}
}
