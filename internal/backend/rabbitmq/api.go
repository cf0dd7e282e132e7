package rabbitmq

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
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
type ctxTransport struct {
	ctx  context.Context
	base http.RoundTripper
}

func (t ctxTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.base.RoundTrip(r.WithContext(t.ctx))
}

// api is a management API client as the admin, bound to ctx.
func (b *Backend) api(ctx context.Context) *rabbithole.Client {
	c, err := rabbithole.NewTLSClient(b.endpoint, b.adminUser, b.adminPassword, ctxTransport{ctx, b.transport})
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
// refused admin needs the user to fix the admin Secret, the rest is
// retried with backoff.
func (b *Backend) apiError(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s on %s: %w", op, b.endpoint, ctx.Err())
	}
	var cve *tls.CertificateVerificationError
	if errors.As(err, &cve) { // waiting would not help: the trust is configured
		return &engine.Refusal{Reason: string(reason.BackendError), Message: fmt.Sprintf(
			"%s on %s: the management API's certificate is not trusted (%v): put the CA that signed it in rabbitmq.tls.caSecretRef", op, b.endpoint, cve.Err)}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return b.unreachable(fmt.Errorf("%s: %w", op, ue.Err))
	}
	var er rabbithole.ErrorResponse
	switch {
	case errors.As(err, &er) && er.StatusCode >= 502 && er.StatusCode <= 504:
		return b.unreachable(fmt.Errorf("%s: %w", op, err))
	case errors.As(err, &er) && er.StatusCode == http.StatusForbidden:
		return &engine.Refusal{Reason: string(reason.BackendError), Message: fmt.Sprintf(
			"%s on %s: the admin user %q may not (403 %s): give it the administrator tag", op, b.endpoint, b.adminUser, er.Reason)}
	case strings.Contains(err.Error(), "401 Unauthorized"): // rabbit-hole returns a 401 as a bare string
		return &engine.Refusal{Reason: string(reason.BackendError), Message: fmt.Sprintf(
			"%s on %s: the management API refused the admin user %q (401): check the username and password in the admin Secret", op, b.endpoint, b.adminUser)}
	}
	return fmt.Errorf("%s on %s: %w", op, b.endpoint, err)
}

func (b *Backend) unreachable(err error) error {
	return &engine.UnreachableError{Instance: b.endpoint, Err: err}
}

// isNotFound: the object (user, vhost) does not exist.
func isNotFound(err error) bool {
	var er rabbithole.ErrorResponse
	return errors.As(err, &er) && er.StatusCode == http.StatusNotFound
}

// isBadRequest returns the broker's reason for a 400.
func isBadRequest(err error) (string, bool) {
	var er rabbithole.ErrorResponse
	if errors.As(err, &er) && er.StatusCode == http.StatusBadRequest {
		return er.Reason, true
	}
	return "", false
}
