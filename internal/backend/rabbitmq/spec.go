package rabbitmq

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"regexp/syntax"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// parseEndpoint returns the management API base URL without a trailing
// slash (the client appends /api/...) and whether it is https.
func parseEndpoint(raw string) (string, bool, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false, fmt.Errorf("rabbitmq.endpoint %q does not parse as a URL (%v): write it as https://host:15671", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", false, fmt.Errorf("rabbitmq.endpoint %q: the scheme must be https (or http with allowPlaintextHTTP), e.g. https://host:15671", raw)
	}
	if u.Host == "" || u.Hostname() == "" || u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
		return "", false, fmt.Errorf("rabbitmq.endpoint %q: give only scheme, host and port of the management API, e.g. https://host:15671", raw)
	}
	return u.Scheme + "://" + u.Host, u.Scheme == "https", nil
}

// checkScheme repeats admission's rules on the endpoint's scheme: plaintext
// only when the spec says so, and no field that would pretend otherwise.
func checkScheme(spec *v1.RabbitMQSpec, https bool) error {
	switch {
	case !https && !spec.AllowPlaintextHTTP:
		return fmt.Errorf("rabbitmq.endpoint %q is http://, which sends the admin's and every rotated user's password unencrypted: use https:// (with tls.caSecretRef for a private CA), or accept plaintext explicitly with spec.rabbitmq.allowPlaintextHTTP: true", spec.Endpoint)
	case https && spec.AllowPlaintextHTTP:
		return errors.New("rabbitmq.allowPlaintextHTTP applies only to an http:// endpoint: remove it")
	case !https && spec.TLS != nil:
		return errors.New("rabbitmq.tls applies only to an https:// endpoint: remove it, or make the endpoint https://")
	}
	return nil
}

// basePattern repeats admission's rule: a base that is empty or ends in
// -g<N> would make other users look like generations of this set, and
// those are deleted.
var (
	basePattern   = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_.]{0,99}$`)
	genSuffixLike = regexp.MustCompile(`-g[0-9]+$`)
)

func checkBase(base string) error {
	if !basePattern.MatchString(base) || genSuffixLike.MatchString(base) {
		return fmt.Errorf("rabbitmq.user.base %q: use letters, digits, '-', '_' and '.', not ending in -g<number> (rekey appends the generation that way)", base)
	}
	return nil
}

// checkAdopt repeats admission's rules on spec.rabbitmq.adopt: the adopted
// user must not be named like one of the set's own generations, which
// rekey deletes by name pattern, nor fall outside the user name pattern.
func checkAdopt(spec *v1.RabbitMQSpec) (string, error) {
	if spec.Adopt == nil {
		return "", nil
	}
	name := spec.Adopt.User
	if !basePattern.MatchString(name) {
		return "", fmt.Errorf("rabbitmq.adopt.user %q: use letters, digits, '-', '_' and '.'", name)
	}
	if _, ok := generationOf(spec.User.Base, name); ok {
		return "", fmt.Errorf("rabbitmq.adopt.user %q is named like one of this set's own generations (%s-g<N>), which rekey creates and deletes by itself: name the user your services log in as today, or give user.base another name", name, spec.User.Base)
	}
	return name, nil
}

func checkPermissions(u v1.RabbitMQUser) error {
	for _, p := range u.Permissions {
		for _, f := range []struct{ name, expr string }{{"configure", p.Configure}, {"write", p.Write}, {"read", p.Read}} {
			if err := checkPattern(f.expr); err != nil {
				return fmt.Errorf("rabbitmq.user.permissions[vhost %q].%s %q is not a regular expression (%v): fix the pattern (\"\" grants nothing, \".*\" everything)",
					p.Vhost, f.name, f.expr, err)
			}
		}
	}
	for _, p := range u.TopicPermissions {
		for _, f := range []struct{ name, expr string }{{"write", p.Write}, {"read", p.Read}} {
			if err := checkPattern(f.expr); err != nil {
				return fmt.Errorf("rabbitmq.user.topicPermissions[vhost %q, exchange %q].%s %q is not a regular expression (%v): fix the pattern (\"\" grants nothing, \".*\" everything)",
					p.Vhost, p.Exchange, f.name, f.expr, err)
			}
		}
	}
	return nil
}

// checkPattern rejects a pattern only when it is broken in PCRE too. The
// broker compiles permissions with PCRE, which has constructs Go's RE2
// lacks (lookarounds such as ^(?!amq\.).*, backreferences, possessive
// quantifiers, (*VERB)s); those are left for the broker to judge, and a
// pattern it refuses then fails Provision or Apply with a refusal naming
// the field.
func checkPattern(expr string) error {
	_, err := syntax.Parse(expr, syntax.Perl)
	var se *syntax.Error
	if !errors.As(err, &se) {
		return nil
	}
	switch se.Code {
	case syntax.ErrMissingParen, syntax.ErrUnexpectedParen, syntax.ErrMissingBracket, syntax.ErrTrailingBackslash:
		return err
	case syntax.ErrMissingRepeatArgument:
		if !strings.Contains(expr, "(*") { // RE2 reads a PCRE verb as a bare *
			return err
		}
	}
	return nil
}

// transportSpec is spec.transportURL and spec.configFile with admission's
// defaults applied, so that Render needs no spec.
type transportSpec struct {
	scheme, vhost, query, key string
	hosts                     []string
	fileKey                   string // "" when no config file is rendered
	section, option           string
}

func resolveTransport(spec *v1.RabbitMQSpec) (*transportSpec, error) {
	t := spec.TransportURL
	if t == nil {
		if spec.ConfigFile != nil {
			return nil, errors.New("rabbitmq.configFile renders the transport_url: set rabbitmq.transportURL too")
		}
		return nil, nil
	}
	if len(t.Hosts) == 0 {
		return nil, errors.New("rabbitmq.transportURL.hosts is empty: list the AMQP listeners as host:port")
	}
	ts := &transportSpec{scheme: t.URLScheme(), hosts: t.Hosts, vhost: t.Vhost, query: t.Query, key: t.SecretKey()}
	if err := checkTransportScheme(ts.scheme, ts.query); err != nil {
		return nil, err
	}
	keys := map[string]string{KeyUsername: "the user name", KeyPassword: "the password"}
	claim := func(key, what string) error {
		if other, ok := keys[key]; ok {
			return fmt.Errorf("rabbitmq: %s and %s are both rendered under key %q of the distributed Secret: give one another key", what, other, key)
		}
		keys[key] = what
		return nil
	}
	if err := claim(ts.key, "transportURL.key"); err != nil {
		return nil, err
	}
	if c := spec.ConfigFile; c != nil {
		if c.Key == "" {
			return nil, errors.New("rabbitmq.configFile.key is empty: name the distributed Secret's key of the file, e.g. 01-nova.conf")
		}
		ts.fileKey, ts.section, ts.option = c.Key, c.SectionName(), c.OptionName()
		if err := claim(ts.fileKey, "configFile.key"); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// sslOff is a query that turns TLS off the way oslo.messaging and kombu
// read it.
var sslOff = regexp.MustCompile(`(^|&)ssl=(0|false|False)(&|$)`)

// checkTransportScheme repeats admission's rules: the scheme is rendered
// as given, so it must be one consumers know, and amqps (TLS by its very
// name) must not be contradicted by a query that turns TLS off, which
// would leave a consumer's choice to its URL parser.
func checkTransportScheme(scheme, query string) error {
	switch scheme {
	case "rabbit", "amqp":
	case "amqps":
		if sslOff.MatchString(query) {
			return fmt.Errorf("rabbitmq.transportURL.scheme amqps means TLS, but the query %q turns ssl off: remove ssl=0 from transportURL.query, or choose scheme rabbit or amqp", query)
		}
	default:
		return fmt.Errorf("rabbitmq.transportURL.scheme %q: use rabbit, amqp or amqps", scheme)
	}
	return nil
}
