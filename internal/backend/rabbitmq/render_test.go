package rabbitmq

import (
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

func renderBackend(t *testing.T, tu *v1.RabbitMQTransportURL, cf *v1.RabbitMQConfigFile) *Backend {
	t.Helper()
	spec := validSpec()
	spec.TransportURL, spec.ConfigFile = tu, cf
	b, err := New(spec, testOwner, "admin", testAdminPassword, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRender(t *testing.T) {
	one := func(vhost string) *v1.RabbitMQTransportURL {
		return &v1.RabbitMQTransportURL{Hosts: []string{"rabbitmq.ns.svc:5672"}, Vhost: vhost}
	}
	plain := engine.Secrets{KeyUsername: "nova-g3", KeyPassword: "Pw0"}
	for _, tc := range []struct {
		name    string
		url     *v1.RabbitMQTransportURL
		file    *v1.RabbitMQConfigFile
		secrets engine.Secrets
		want    map[string]string // besides username and password
	}{
		{name: "user and password only", secrets: plain, want: map[string]string{}},
		{name: "default vhost is the empty path", url: one(""), secrets: plain,
			want: map[string]string{"transport_url": "rabbit://nova-g3:Pw0@rabbitmq.ns.svc:5672/"}},
		{name: "vhost / is the empty path", url: one("/"), secrets: plain,
			want: map[string]string{"transport_url": "rabbit://nova-g3:Pw0@rabbitmq.ns.svc:5672/"}},
		{name: "named vhost", url: one("prod"), secrets: plain,
			want: map[string]string{"transport_url": "rabbit://nova-g3:Pw0@rabbitmq.ns.svc:5672/prod"}},
		{name: "vhost with a slash", url: one("a/b"), secrets: plain,
			want: map[string]string{"transport_url": "rabbit://nova-g3:Pw0@rabbitmq.ns.svc:5672/a%2Fb"}},
		{name: "hostile vhost", url: one(`a b?c#d%e&f=g$h,i@j:k;l+m"n'o\p/`), secrets: plain,
			want: map[string]string{"transport_url": "rabbit://nova-g3:Pw0@rabbitmq.ns.svc:5672/a%20b%3Fc%23d%25e%26f%3Dg%24h%2Ci%40j%3Ak%3Bl%2Bm%22n%27o%5Cp%2F"}},
		{name: "unicode vhost", url: one("prod-é"), secrets: plain,
			want: map[string]string{"transport_url": "rabbit://nova-g3:Pw0@rabbitmq.ns.svc:5672/prod-%C3%A9"}},
		{name: "several hosts, amqps and a query",
			url:     &v1.RabbitMQTransportURL{Scheme: "amqps", Hosts: []string{"rmq-0.rmq:5671", "rmq-1.rmq:5671", "10.0.0.7:5671"}, Vhost: "nova", Query: "ssl=1&heartbeat=30"},
			secrets: plain,
			want:    map[string]string{"transport_url": "amqps://nova-g3:Pw0@rmq-0.rmq:5671,nova-g3:Pw0@rmq-1.rmq:5671,nova-g3:Pw0@10.0.0.7:5671/nova?ssl=1&heartbeat=30"}},
		{name: "adopted credentials with separators", url: one(""),
			secrets: engine.Secrets{KeyUsername: "svc@corp,x", KeyPassword: "p:w/@,$%~._-"},
			want:    map[string]string{"transport_url": "rabbit://svc%40corp%2Cx:p%3Aw%2F%40%2C%24%25~._-@rabbitmq.ns.svc:5672/"}},
		{name: "own key", url: &v1.RabbitMQTransportURL{Hosts: []string{"h:5672"}, Key: "url"}, secrets: plain,
			want: map[string]string{"url": "rabbit://nova-g3:Pw0@h:5672/"}},
		{name: "config file with defaults", url: one("/"), file: &v1.RabbitMQConfigFile{Key: "01-nova.conf"}, secrets: plain,
			want: map[string]string{
				"transport_url": "rabbit://nova-g3:Pw0@rabbitmq.ns.svc:5672/",
				"01-nova.conf":  "[DEFAULT]\ntransport_url = rabbit://nova-g3:Pw0@rabbitmq.ns.svc:5672/\n",
			}},
		{name: "config file section and option", url: one("nova"),
			file:    &v1.RabbitMQConfigFile{Key: "notify.conf", Section: "oslo_messaging_notifications", Option: "transport_url"},
			secrets: plain,
			want: map[string]string{
				"transport_url": "rabbit://nova-g3:Pw0@rabbitmq.ns.svc:5672/nova",
				"notify.conf":   "[oslo_messaging_notifications]\ntransport_url = rabbit://nova-g3:Pw0@rabbitmq.ns.svc:5672/nova\n",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := renderBackend(t, tc.url, tc.file).Render(tc.secrets)
			if err != nil {
				t.Fatal(err)
			}
			want := maps.Clone(tc.want)
			want[KeyUsername], want[KeyPassword] = tc.secrets[KeyUsername], tc.secrets[KeyPassword]
			if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
				t.Fatalf("keys %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
			}
			for k, v := range want {
				if string(got[k]) != v {
					t.Errorf("%s:\n got  %q\n want %q", k, got[k], v)
				}
			}
		})
	}
}

// Secrets the backend never produces are the one failure, and the message
// holds no value.
func TestRenderRefusesIncompleteSecrets(t *testing.T) {
	b := renderBackend(t, &v1.RabbitMQTransportURL{Hosts: []string{"h:5672"}}, nil)
	for _, s := range []engine.Secrets{{KeyPassword: "TopSecretPw"}, {KeyUsername: "nova-g1"}, nil} {
		_, err := b.Render(s)
		if err == nil {
			t.Fatalf("rendered %d keys", len(s))
		}
		if strings.Contains(err.Error(), "TopSecretPw") {
			t.Errorf("error quotes the password: %v", err)
		}
	}
}

// Every secret NewSecrets mints renders, and its password needs no
// escaping: consumers may paste it anywhere.
func TestRenderMintedSecrets(t *testing.T) {
	b := renderBackend(t, &v1.RabbitMQTransportURL{Hosts: []string{"h:5672"}}, &v1.RabbitMQConfigFile{Key: "f.conf"})
	for gen := int64(1); gen <= 50; gen++ {
		s, err := b.NewSecrets(gen)
		if err != nil {
			t.Fatal(err)
		}
		out, err := b.Render(s)
		if err != nil {
			t.Fatal(err)
		}
		if want := "rabbit://" + s[KeyUsername] + ":" + s[KeyPassword] + "@h:5672/"; string(out["transport_url"]) != want {
			t.Fatalf("generation %d: %q, want %q", gen, out["transport_url"], want)
		}
	}
}
