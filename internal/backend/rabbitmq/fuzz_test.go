package rabbitmq

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

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
		b, err := New(spec, testOwner, "admin", "pw", nil)
		if amqps && sslOff.MatchString(query) { // TLS by scheme, off by query
			if err == nil || !strings.Contains(err.Error(), "transportURL.scheme amqps") {
				t.Fatalf("amqps with query %q: %v", query, err)
			}
			return
		}
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
		if !strings.HasPrefix(raw, scheme+"://") { // amqps when asked, and only then
			t.Fatalf("%q: want scheme %s", raw, scheme)
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
			if got, ok := generationOf(base, UserName(base, gen)); !ok || got != gen {
				t.Fatalf("UserName(%q, %d) reads back as %d, %v", base, gen, got, ok)
			}
		}
		if got, ok := generationOf(base, name); ok && UserName(base, got) != name {
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

// FuzzTransportSecurity: whatever the endpoint and the two fields, New
// accepts plaintext only with the opt-in, and InsecureTransport is silent
// exactly for verified https — never quoting the admin password.
func FuzzTransportSecurity(f *testing.F) {
	f.Add("https://rabbit:15671", false, false)
	f.Add("http://rabbit:15672", true, false)
	f.Add("http://rabbit:15672", false, false)
	f.Add("https://rabbit:15671", false, true)
	f.Add("HTTP://rabbit:15672", true, false)
	f.Add("https://rabbit:15671", true, true)
	f.Fuzz(func(t *testing.T, endpoint string, allowPlaintext, skipVerify bool) {
		spec := validSpec()
		spec.Endpoint, spec.AllowPlaintextHTTP = endpoint, allowPlaintext
		if skipVerify {
			spec.TLS = &v1.RabbitMQTLS{InsecureSkipVerify: true}
		}
		b, err := New(spec, testOwner, "admin", testAdminPassword, nil)
		if err != nil {
			if strings.Contains(err.Error(), testAdminPassword) {
				t.Fatalf("error quotes the admin password: %v", err)
			}
			return
		}
		https := strings.HasPrefix(b.Endpoint(), "https://")
		if !https && (!allowPlaintext || skipVerify) || https && allowPlaintext {
			t.Fatalf("accepted %q with allowPlaintextHTTP=%v insecureSkipVerify=%v", endpoint, allowPlaintext, skipVerify)
		}
		msg := b.InsecureTransport()
		switch {
		case https && !skipVerify:
			if msg != "" {
				t.Fatalf("verified https reported insecure: %q", msg)
			}
		case https:
			if !strings.Contains(msg, "spec.rabbitmq.tls.insecureSkipVerify") {
				t.Fatalf("unverified https reported as %q", msg)
			}
		default:
			if !strings.Contains(msg, "spec.rabbitmq.allowPlaintextHTTP") {
				t.Fatalf("plaintext reported as %q", msg)
			}
		}
		if strings.Contains(msg, testAdminPassword) {
			t.Fatalf("report quotes the admin password: %q", msg)
		}
	})
}

// FuzzOwnership: an accepted owner is one tag (no separator, no space),
// users rekey makes carry it and are owned, and no accepted spec tag can
// pass for any owner's mark.
func FuzzOwnership(f *testing.F) {
	f.Add(testOwner, "management", "other-owner")
	f.Add("a,b", "rekey-owner-x", "x")
	f.Add("x y", "monitoring,administrator", "")
	f.Fuzz(func(t *testing.T, owner, tag, other string) {
		spec := validSpec()
		spec.User.Tags = []string{tag}
		b, err := New(spec, owner, "admin", testAdminPassword, nil)
		if err != nil {
			return
		}
		mark := OwnerTag(owner)
		if strings.ContainsAny(mark, ", \t\r\n\x00") || !ownerPattern.MatchString(owner) {
			t.Fatalf("owner %q accepted as the mark %q", owner, mark)
		}
		if strings.HasPrefix(tag, OwnerTagPrefix) || strings.Contains(tag, ",") {
			t.Fatalf("spec tag %q accepted", tag)
		}
		tags := b.userTags()
		if !b.owned(tags) || tags[len(tags)-1] != mark {
			t.Fatalf("a user rekey makes carries %q, not owned by %q", tags, owner)
		}
		// Another owner's mark, or the spec's tags alone, are not ours.
		if other != owner && b.owned(rabbithole.UserTags{tag, OwnerTag(other)}) {
			t.Fatalf("tags %q taken for owner %q", []string{tag, OwnerTag(other)}, owner)
		}
	})
}
