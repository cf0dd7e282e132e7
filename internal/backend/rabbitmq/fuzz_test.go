package rabbitmq

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// Admission's patterns for what the spec contributes to the URL.
var (
	hostAdmitted  = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?:[0-9]{1,5}$`)
	queryAdmitted = regexp.MustCompile(`^[A-Za-z0-9_.~=&%-]{0,512}$`)
)

// parseTransportURL reads a multi-host transport_url the way
// oslo.messaging does: the authority splits on ',' into user:pass@host
// parts. net/url cannot take several hosts at once (it splits userinfo at
// the last '@'), so each part, and the path, are parsed on their own.
func parseTransportURL(t *testing.T, scheme, raw string) (users, passwords, hosts []string, vhost, query string) {
	t.Helper()
	rest, ok := strings.CutPrefix(raw, scheme+"://")
	if !ok {
		t.Fatalf("%q does not start with %s://", raw, scheme)
	}
	authority, path, ok := strings.Cut(rest, "/")
	if !ok {
		t.Fatalf("%q has no path", raw)
	}
	for _, part := range strings.Split(authority, ",") {
		u, err := url.Parse(scheme + "://" + part + "/")
		if err != nil {
			t.Fatalf("host part %q of %q: %v", part, raw, err)
		}
		pw, _ := u.User.Password()
		users, passwords, hosts = append(users, u.User.Username()), append(passwords, pw), append(hosts, u.Host)
	}
	u, err := url.Parse(scheme + "://h/" + path)
	if err != nil {
		t.Fatalf("path of %q: %v", raw, err)
	}
	vhost = strings.TrimPrefix(u.Path, "/")
	if vhost == "" {
		vhost = "/"
	}
	return users, passwords, hosts, vhost, u.RawQuery
}

// Whatever user, password and vhost (adopted credentials may hold any
// byte), the transport_url parses back to exactly them, holds nothing a
// config file or shell would read specially, and the config file is one
// section and one option.
func FuzzTransportURL(f *testing.F) {
	f.Add("nova-g1", "Pw0", "/", "", "rabbitmq:5672", "", false)
	f.Add("u@x,y:z", "p/w?#[]$%", "a/b", "ssl=1", "h1:5671", "h2:5671", true)
	f.Add("", "", "", "", "h:1", "h:2", true)
	f.Add("é\x00\n", "\xff\r\n[x]", "%2F", "a=%41", "10.0.0.1:5672", "x", false)
	f.Fuzz(func(t *testing.T, user, password, vhost, query, h1, h2 string, amqps bool) {
		hosts := []string{h1}
		if h2 != "" {
			hosts = append(hosts, h2)
		}
		for _, h := range hosts {
			if !hostAdmitted.MatchString(h) {
				return
			}
		}
		if !queryAdmitted.MatchString(query) {
			return
		}
		scheme := "rabbit"
		if amqps {
			scheme = "amqps"
		}
		spec := validSpec()
		spec.TransportURL = &v1.RabbitMQTransportURL{Scheme: scheme, Hosts: hosts, Vhost: vhost, Query: query}
		spec.ConfigFile = &v1.RabbitMQConfigFile{Key: "f.conf"}
		b, err := New(spec, "admin", "pw", nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := b.Render(engine.Secrets{KeyUsername: user, KeyPassword: password})
		if user == "" || password == "" {
			if err == nil {
				t.Fatal("rendered empty credentials")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		raw := string(out["transport_url"])
		if i := strings.IndexFunc(raw, func(r rune) bool { return r <= ' ' || r > '~' || strings.ContainsRune("$\"'`\\#;[]", r) }); i >= 0 {
			t.Fatalf("%q holds %q", raw, raw[i])
		}
		gotUsers, gotPasswords, gotHosts, gotVhost, gotQuery := parseTransportURL(t, scheme, raw)
		for i := range hosts {
			if gotUsers[i] != user || gotPasswords[i] != password || gotHosts[i] != hosts[i] {
				t.Fatalf("host part %d of %q reads back as %q:%q@%s", i, raw, gotUsers[i], gotPasswords[i], gotHosts[i])
			}
		}
		if len(gotHosts) != len(hosts) {
			t.Fatalf("%q names %d hosts, want %d", raw, len(gotHosts), len(hosts))
		}
		wantVhost := vhost
		if wantVhost == "" {
			wantVhost = "/"
		}
		if gotVhost != wantVhost || gotQuery != query {
			t.Fatalf("%q reads back vhost %q query %q, want %q %q", raw, gotVhost, gotQuery, wantVhost, query)
		}
		if len(hosts) == 1 { // then net/url reads the whole URL directly
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			if pw, _ := u.User.Password(); u.User.Username() != user || pw != password || u.Host != hosts[0] {
				t.Fatalf("net/url reads %q as %q:%q@%s", raw, u.User.Username(), pw, u.Host)
			}
		}
		if want := "[DEFAULT]\ntransport_url = " + raw + "\n"; string(out["f.conf"]) != want {
			t.Fatalf("config file %q, want %q", out["f.conf"], want)
		}
	})
}

// A user name is a generation of exactly one base and number.
func FuzzGenerationOf(f *testing.F) {
	f.Add("nova", "nova-g1", int64(1))
	f.Add("a.b", "a.b-g01", int64(7))
	f.Fuzz(func(t *testing.T, base, name string, gen int64) {
		if gen >= 1 {
			if got, ok := generationOf(base, userName(base, gen)); !ok || got != gen {
				t.Fatalf("userName(%q, %d) reads back as %d, %v", base, gen, got, ok)
			}
		}
		if got, ok := generationOf(base, name); ok && userName(base, got) != name {
			t.Fatalf("%q taken for generation %d of %q", name, got, base)
		}
	})
}

// FuzzParseEndpoint: an accepted endpoint is only scheme, host and port —
// no credentials, path or query that could redirect rekey's admin
// requests or leak the admin password into a URL.
func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{"http://rabbit:15672", "https://10.0.0.1:15671/", "http://u:p@rabbit:15672",
		"http://rabbit:15672/api", "http://rabbit:15672?x", "ftp://x", "http://[::1]:15672", "http://rabbit:15672#f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		ep, https, err := parseEndpoint(raw)
		if err != nil {
			return
		}
		u, perr := url.Parse(ep)
		if perr != nil {
			t.Fatalf("accepted %q as %q, which does not parse: %v", raw, ep, perr)
		}
		if u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Host == "" {
			t.Fatalf("accepted %q as %q, which carries more than scheme, host and port", raw, ep)
		}
		if https != (u.Scheme == "https") || (u.Scheme != "http" && u.Scheme != "https") {
			t.Fatalf("accepted %q with scheme %q (https=%v)", raw, u.Scheme, https)
		}
	})
}
