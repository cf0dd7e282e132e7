package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"rekey.io/rekey/internal/engine"
)

var _ engine.Checker = (*Backend)(nil)

// Check implements engine.Checker: whether the management API answers at
// the endpoint over the transport the spec asks for, whether it accepts
// the admin and the admin has the administrator tag (rekey creates users,
// sets their permissions and reads password hashes), the broker's
// version, whether every vhost the user gets permissions in exists, and
// whether the current user logs in with the password rekey holds. It only
// reads.
func (b *Backend) Check(ctx context.Context, in engine.CheckInput) []engine.Finding {
	target := b.endpoint
	who, err := b.api(ctx).Whoami()
	if err != nil {
		return b.connectFindings(ctx, err)
	}
	fs := []engine.Finding{
		{Target: target, Check: "reachable", OK: true, Message: "the management API answers"},
		{Target: target, Check: "tls", OK: true, Message: b.transportWords()},
		{Target: target, Check: "login", OK: true, Message: "the admin user " + b.adminUser + " logs in"},
		b.tagFinding(who.Tags),
	}
	if v, err := b.Version(ctx, nil); err != nil {
		fs = append(fs, engine.Finding{Target: target, Check: "version", Message: "unreadable: " + refusalText(err), Fix: "check that spec.rabbitmq.endpoint is the management API's base URL"})
	} else {
		fs = append(fs, engine.Finding{Target: target, Check: "version", OK: true, Message: "RabbitMQ " + v})
	}
	fs = append(fs, b.vhostFindings(ctx)...)
	return append(fs, b.userFinding(ctx, in))
}

// connectFindings say why the admin's first request failed.
func (b *Backend) connectFindings(ctx context.Context, err error) []engine.Finding {
	target := b.endpoint
	reached := engine.Finding{Target: target, Check: "reachable", OK: true, Message: "something answers at " + target}
	k, text := classifyHTTP(err)
	switch k {
	case httpUnreachable:
		reached.OK, reached.Deferred = false, true
		reached.Message = fmt.Sprintf("no answer from %s: %s", target, text)
		if errors.Is(err, syscall.ECONNREFUSED) {
			reached.Message = fmt.Sprintf("nothing listens on %s (connection refused)", target)
		}
		reached.Fix = "start the broker's management plugin there, or correct spec.rabbitmq.endpoint"
		return []engine.Finding{reached}
	case httpTLS:
		return []engine.Finding{reached, {Target: target, Check: "tls",
			Message: fmt.Sprintf("the management API's certificate is not trusted (%s), so rekey sends it no credentials", text),
			Fix:     "put the CA certificate that signed it in the Secret spec.rabbitmq.tls.caSecretRef names, or give the endpoint a certificate for its host"}}
	case httpAuth:
		return []engine.Finding{reached, {Target: target, Check: "login",
			Message: fmt.Sprintf("the management API refuses the admin user %s (HTTP 401)", b.adminUser),
			Fix:     fmt.Sprintf("put the working admin credentials in the admin %s", b.adminSecret)}}
	case httpForbidden:
		return []engine.Finding{reached, {Target: target, Check: "tags",
			Message: fmt.Sprintf("the admin user %s may not use the management API (HTTP 403)", b.adminUser),
			Fix:     "rabbitmqctl set_user_tags " + b.adminUser + " administrator"}}
	case httpNotAPI:
		reached.OK, reached.Message = false, fmt.Sprintf("%s answers with %s, not as the RabbitMQ management API does", target, text)
		reached.Fix = "check that spec.rabbitmq.endpoint is the management API's base URL (e.g. https://rabbitmq.shop.svc:15671)"
		return []engine.Finding{reached}
	}
	if ctx.Err() != nil {
		text = "cancelled"
	}
	reached.OK, reached.Message, reached.Fix = false, "the admin's request failed: "+text, "run kubectl rekey check again; if it persists, see the manager's log"
	return []engine.Finding{reached}
}

// transportWords says how the endpoint is verified.
func (b *Backend) transportWords() string {
	switch {
	case b.plaintext:
		return "not verified: plain HTTP (spec.rabbitmq.allowPlaintextHTTP; rekey warns about it with InsecureTransport)"
	case b.skipVerify:
		return "not verified: spec.rabbitmq.tls.insecureSkipVerify (rekey warns about it with InsecureTransport)"
	}
	return "TLS, the certificate verified"
}

// knownTags are RabbitMQ's own user tags: the only tags the fix repeats
// of what the endpoint answered (whatever answers there must not have its
// text reach the tenant; other tags the admin has are named as "...").
var knownTags = []string{"management", "policymaker", "monitoring", "impersonator"}

// tagFinding: the admin needs the administrator tag.
func (b *Backend) tagFinding(tags []string) engine.Finding {
	f := engine.Finding{Target: b.endpoint, Check: "tags", OK: true, Message: "the admin user " + b.adminUser + " has the administrator tag"}
	if slices.Contains(tags, "administrator") {
		return f
	}
	keep := []string{"administrator"}
	others := false
	for _, t := range tags {
		if slices.Contains(knownTags, t) {
			keep = append(keep, t)
		} else {
			others = true
		}
	}
	if others {
		keep = append(keep, "<its other tags>")
	}
	f.OK = false
	f.Message = "the admin user " + b.adminUser + " lacks the administrator tag, which creating users, setting their permissions and reading their password hashes need"
	// set_user_tags replaces the user's tags: the ones it has are kept.
	f.Fix = "rabbitmqctl set_user_tags " + b.adminUser + " " + strings.Join(keep, " ")
	return f
}

// vhostFindings: every vhost the user gets permissions in exists.
func (b *Backend) vhostFindings(ctx context.Context) []engine.Finding {
	var out []engine.Finding
	seen := map[string]bool{}
	vhosts := []string{}
	for _, p := range b.permissions {
		vhosts = append(vhosts, p.Vhost)
	}
	for _, p := range b.topics {
		vhosts = append(vhosts, p.Vhost)
	}
	for _, v := range vhosts {
		if seen[v] {
			continue
		}
		seen[v] = true
		f := engine.Finding{Target: b.endpoint, Check: "vhost " + v, OK: true, Message: "exists"}
		if _, err := b.api(ctx).GetVhost(v); err != nil {
			f.OK = false
			if isNotFound(err) {
				f.Message = "does not exist, and the user gets permissions there"
				f.Fix = fmt.Sprintf("create it (rabbitmqctl add_vhost %s), or correct spec.rabbitmq.user.permissions", v)
			} else {
				f.Message = "could not be read: " + refusalText(b.apiError(ctx, "read vhost "+v, err))
				f.Fix = "see the message"
			}
		}
		out = append(out, f)
	}
	return out
}

// userFinding: the current generation's user logs in with what rekey
// holds; before the first generation, what provisioning will do. A
// failure is Deferred: the rotation's precheck refuses it with a reason of
// its own (KeyMismatch).
func (b *Backend) userFinding(ctx context.Context, in engine.CheckInput) engine.Finding {
	user, pw := in.Current[KeyUsername], in.Current[KeyPassword]
	f := engine.Finding{Target: b.endpoint, OK: true}
	switch {
	case user == "" && b.adopt != "":
		f.Check, f.Message = "user "+b.adopt, "adopted at provisioning, with the password in spec.rabbitmq.adopt's Secret"
		return f
	case user == "" || pw == "":
		f.Check, f.Message = "user "+UserName(b.base, 1), "missing: rekey creates it"
		return f
	}
	f.Check = "user " + user
	ok, err := b.authenticates(ctx, user, pw)
	switch {
	case err != nil:
		f.OK, f.Deferred, f.Message, f.Fix = false, true, "its login could not be checked: "+refusalText(err), "see the message"
	case ok:
		f.Message = "logs in with the password rekey holds"
	default:
		f.OK, f.Deferred, f.Message = false, true, "refuses the password rekey holds for it (changed or deleted outside rekey?)"
		f.Fix = "set its password back to the source Secret's (kubectl rekey show prints it), or run kubectl rekey recover"
	}
	return f
}

// refusalText is an error of this backend in rekey's words: a refusal's
// message, else the error's own text (rekey's already, see apiError).
func refusalText(err error) string {
	var u *engine.UnreachableError
	if errors.As(err, &u) {
		return "no answer: " + u.Err.Error()
	}
	if rf, ok := engine.AsRefusal(err); ok {
		return rf.Message
	}
	return err.Error()
}
