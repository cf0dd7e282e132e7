package rabbitmq

import (
	"errors"
	"strings"

	"rekey.io/rekey/internal/engine"
)

// redact is the last line of defence for "no secret in any message": the
// broker and the HTTP stack have no reason to echo a password, but an
// error that did would reach Events and conditions. The error's kind
// survives, since the controller acts on it.
func (b *Backend) redact(err error, secrets ...engine.Secrets) error {
	if err == nil {
		return nil
	}
	pws := []string{b.adminPassword}
	for _, s := range secrets {
		pws = append(pws, s[KeyPassword])
	}
	scrub := func(msg string) (string, bool) {
		out := msg
		for _, p := range pws {
			if p != "" {
				out = strings.ReplaceAll(out, p, "[redacted]")
			}
		}
		return out, out != msg
	}
	msg, dirty := scrub(err.Error())
	if !dirty {
		return err
	}
	if r, ok := engine.AsRefusal(err); ok {
		m, _ := scrub(r.Message)
		return &engine.Refusal{Reason: r.Reason, Message: m}
	}
	if u, ok := engine.AsUnreachable(err); ok {
		m, _ := scrub(u.Err.Error())
		return &engine.UnreachableError{Instance: u.Instance, Err: errors.New(m)}
	}
	return errors.New(msg)
}
