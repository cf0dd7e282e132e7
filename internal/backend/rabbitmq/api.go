package rabbitmq

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

func newTransport(https bool, spec *v1.RabbitMQTLS, caPEM []byte) (http.RoundTripper, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// The controller may build a Backend per reconcile: pooled idle
	// connections would pile up across instances (rabbit-hole closes its
	// own after each request for the same reason).
	t.DisableKeepAlives = true
	if !https {
		return t, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("rabbitmq.tls.caSecretRef holds no PEM certificate: put the CA bundle that signed the management API's certificate there")
		}
		cfg.RootCAs = pool
	}
	if spec != nil && spec.InsecureSkipVerify {
		cfg.InsecureSkipVerify = true
	}
	t.TLSClientConfig = cfg
	return t, nil
}

// ctxTransport gives rabbit-hole's requests, which it builds without a
// context, the caller's: a cancelled reconcile stops waiting on the broker.
// A request that changes the broker (anything but GET and HEAD) asks the
// fence first, if any, then checks and records the leadership term, if
// any (fence.go): a manager that lost the leadership changes nothing.
type ctxTransport struct {
	ctx   context.Context
	base  http.RoundTripper
	fence func(context.Context) error
	term  func(context.Context) error
}

func (t ctxTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		for _, check := range []func(context.Context) error{t.fence, t.term} {
			if check == nil {
				continue
			}
			if err := check(t.ctx); err != nil {
				return nil, &fencedError{err}
			}
		}
	}
	return t.base.RoundTrip(r.WithContext(t.ctx))
}

// fencedError is the fence's refusal, passed through as it is.
type fencedError struct{ err error }

func (e *fencedError) Error() string { return e.err.Error() }
func (e *fencedError) Unwrap() error { return e.err }

// api is a management API client as the admin, bound to ctx.
func (b *Backend) api(ctx context.Context) *rabbithole.Client {
	t := ctxTransport{ctx: ctx, base: b.transport, fence: b.Fence}
	if b.Term != 0 {
		t.term = b.checkTerm
	}
	return b.apiWith(ctx, t)
}

// apiWith is a management API client as the admin through t.
func (b *Backend) apiWith(_ context.Context, t ctxTransport) *rabbithole.Client {
	c, err := rabbithole.NewTLSClient(b.endpoint, b.adminUser, b.adminPassword, t)
	if err != nil {
		panic(err) // New parsed the endpoint already
	}
	c.SetTimeout(b.timeout())
	return c
}

func (b *Backend) timeout() time.Duration {
	if b.Timeout <= 0 {
		return DefaultTimeout
	}
	return b.Timeout
}

// drain makes a rabbit-hole call that returns a response into one that
// returns only its error, closing the body.
func drain(res *http.Response, err error) error {
	if res != nil && res.Body != nil {
		res.Body.Close()
	}
	return err
}

// apiError sorts an error of the management API into what the controller
// acts on: an unreachable broker holds the phase until it answers, a
// refused admin (AuthenticationFailed) or one without the administrator
// tag (PermissionDenied) needs a person, an untrusted certificate or an
// answer that is not the management API's needs the spec fixed; the rest
// is retried with backoff. The text is rekey's own with at most an HTTP
// status code: a set can point rekey at any URL the manager reaches, and
// what answers there (a body, a header, a certificate's names) must not
// come back to the set's tenant.
func (b *Backend) apiError(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s on %s: %w", op, b.endpoint, ctx.Err())
	}
	var f *fencedError
	if errors.As(err, &f) {
		return fmt.Errorf("%s on %s: %w", op, b.endpoint, f)
	}
	k, text := classifyHTTP(err)
	switch k {
	case httpTLS: // waiting would not help: the trust is configured
		return &engine.Refusal{Reason: string(reason.BackendError), Message: fmt.Sprintf(
			"%s on %s: the management API's certificate is not trusted (%s), so rekey sent it no credentials: put the CA that signed it in rabbitmq.tls.caSecretRef", op, b.endpoint, text)}
	case httpUnreachable:
		return b.unreachable(&hiddenError{op + ": " + text, err})
	case httpAuth:
		return &engine.Refusal{Reason: string(reason.AuthenticationFailed), Message: fmt.Sprintf(
			"%s on %s: the management API refused the admin user %q (HTTP 401): the username or password in the admin %s is wrong, the user was deleted or changed on the broker, or it has no tags (a user without the management or administrator tag may not use the management API: rabbitmqctl set_user_tags %s administrator); put the working admin credentials there. Nothing was changed", op, b.endpoint, b.adminUser, b.adminSecret, b.adminUser)}
	case httpForbidden:
		return &engine.Refusal{Reason: string(reason.PermissionDenied), Message: fmt.Sprintf(
			"%s on %s: the admin user %q may not (HTTP 403): give it the administrator tag. Nothing was changed", op, b.endpoint, b.adminUser)}
	case httpNotAPI:
		return &engine.Refusal{Reason: string(reason.BackendError), Message: fmt.Sprintf(
			"%s on %s: %s, not the RabbitMQ management API's: check that spec.rabbitmq.endpoint is the management API's base URL. Nothing was changed", op, b.endpoint, text)}
	}
	return &hiddenError{fmt.Sprintf("%s on %s: %s", op, b.endpoint, text), err}
}

// httpKind is what a failed management API call is.
type httpKind int

const (
	httpOther       httpKind = iota // an HTTP error status rekey does not expect
	httpUnreachable                 // no answer, or a gateway's 502-504
	httpTLS                         // the certificate does not verify
	httpAuth                        // 401: the credential is refused
	httpForbidden                   // 403: the user lacks a tag or permission
	httpNotAPI                      // an answer, but not the management API's
)

// classifyHTTP says what err (of rabbit-hole, net/http or the network)
// is, in rekey's words: built from error types and status codes only.
// rabbit-hole's ErrorResponse carries the broker's body, net/http's
// "malformed HTTP response" quotes what the server sent, and a
// certificate error its names; none of that is used.
func classifyHTTP(err error) (httpKind, string) {
	var (
		cve *tls.CertificateVerificationError
		rhe tls.RecordHeaderError
		er  rabbithole.ErrorResponse
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
		ne  net.Error
	)
	switch {
	case errors.As(err, &cve):
		return httpTLS, certificateFault(cve.Err)
	case errors.As(err, &rhe):
		return httpNotAPI, "the server does not speak TLS"
	case strings.Contains(err.Error(), "401 Unauthorized"): // rabbit-hole returns a 401 as a bare string
		return httpAuth, "HTTP 401"
	case errors.As(err, &er) && er.StatusCode >= 502 && er.StatusCode <= 504:
		return httpUnreachable, fmt.Sprintf("HTTP %d from a gateway", er.StatusCode)
	case errors.As(err, &er) && er.StatusCode == http.StatusForbidden:
		return httpForbidden, "HTTP 403"
	case errors.As(err, &er):
		return httpOther, fmt.Sprintf("unexpected answer (HTTP %d)", er.StatusCode)
	case errors.As(err, &se), errors.As(err, &te), errors.Is(err, io.ErrUnexpectedEOF) && !isNetError(err):
		return httpNotAPI, "an answer that is not the JSON rekey expects"
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return httpUnreachable, "no answer in time"
	case errors.Is(err, syscall.ECONNREFUSED):
		return httpUnreachable, "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF):
		return httpUnreachable, "the connection was closed"
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return httpUnreachable, "host not found"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if isNetError(ue.Err) {
			return httpUnreachable, "network error"
		}
		// net/http's own complaints (a malformed response, a response
		// to an https request over http) quote what the server sent.
		return httpNotAPI, "an answer that is not HTTP as rekey expects it"
	}
	return httpOther, "unexpected answer"
}

func isNetError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// certificateFault names why a certificate does not verify, never what
// it holds.
func certificateFault(err error) string {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &unknown):
		return "signed by an unknown authority"
	case errors.As(err, &hostname):
		return "not valid for the endpoint's host"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "expired or not yet valid"
	case errors.As(err, &invalid):
		return "invalid"
	}
	return "does not verify"
}

// hiddenError is rekey's text for an error whose own text may quote what
// a server sent; the error stays in the chain for rekey's decisions
// (isNotFound, isBadRequest).
type hiddenError struct {
	msg string
	err error
}

func (e *hiddenError) Error() string { return e.msg }

func (e *hiddenError) Unwrap() error { return e.err }

func (b *Backend) unreachable(err error) error {
	return &engine.UnreachableError{Instance: b.endpoint, Err: err}
}

// isNotFound: the object (user, vhost) does not exist.
func isNotFound(err error) bool {
	var er rabbithole.ErrorResponse
	return errors.As(err, &er) && er.StatusCode == http.StatusNotFound
}

// isBadRequest: the broker refused the request as invalid (400).
func isBadRequest(err error) bool {
	var er rabbithole.ErrorResponse
	return errors.As(err, &er) && er.StatusCode == http.StatusBadRequest
}
