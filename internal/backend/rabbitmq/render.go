package rabbitmq

import (
	"fmt"
	"strings"

	"rekey.io/rekey/internal/engine"
)

// Render implements engine.Backend: the user and password, and where the
// spec asks, the transport_url and a config file holding it. It fails only
// for secrets that lack a key, which the backend never produces.
func (b *Backend) Render(s engine.Secrets) (map[string][]byte, error) {
	user, password, err := identity(s, "distributed")
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{KeyUsername: []byte(user), KeyPassword: []byte(password)}
	if t := b.url; t != nil {
		u := t.render(user, password)
		out[t.key] = []byte(u)
		if t.fileKey != "" {
			out[t.fileKey] = fmt.Appendf(nil, "[%s]\n%s = %s\n", t.section, t.option, u)
		}
	}
	return out, nil
}

// render writes scheme://user:pass@h1:p1,user:pass@h2:p2/vhost?query, the
// oslo.messaging form of several brokers: the credentials repeat per host.
func (t *transportSpec) render(user, password string) string {
	var b strings.Builder
	b.WriteString(t.scheme + "://")
	cred := escape(user) + ":" + escape(password) + "@"
	for i, h := range t.hosts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(cred + h)
	}
	b.WriteByte('/')
	if t.vhost != "" && t.vhost != "/" { // the default vhost is the empty path
		b.WriteString(escape(t.vhost))
	}
	if t.query != "" {
		b.WriteString("?" + t.query)
	}
	return b.String()
}

// escape percent-encodes every byte but RFC 3986's unreserved ones. Go's
// url.UserPassword would leave ',' (the host separator here) and '$' (which
// oslo.config substitutes inside config files) as they are; after this,
// the URL holds no character any consumer's parser treats specially.
func escape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
