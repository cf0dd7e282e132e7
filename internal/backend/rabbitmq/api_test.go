package rabbitmq

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
)

func TestCertificateFault(t *testing.T) {
	// As net/http returns them: inside a *url.Error, wrapped once more.
	wrap := func(err error) error {
		return fmt.Errorf("list users: %w", &url.Error{Op: "Get", URL: "https://mq:15671/api/users", Err: err})
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"unknown authority", wrap(x509.UnknownAuthorityError{}), "signed by an unknown authority"},
		{"wrong host", wrap(x509.HostnameError{Host: "mq"}), "not valid for the endpoint's host"},
		{"expired", wrap(x509.CertificateInvalidError{Reason: x509.Expired}), "expired or not yet valid"},
		{"other invalid", wrap(x509.CertificateInvalidError{Reason: x509.NotAuthorizedToSign}), "invalid"},
		{"anything else", wrap(errors.New("tls: handshake failure")), "does not verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := certificateFault(tc.err); got != tc.want {
				t.Fatalf("certificateFault = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStatusThroughHiddenError(t *testing.T) {
	// hiddenError replaces the broker's text but keeps its answer in the
	// chain: rekey's decisions still see a 404 or a 400.
	hide := func(code int) error {
		return &hiddenError{msg: "the broker refused", err: rabbithole.ErrorResponse{StatusCode: code}}
	}
	for _, tc := range []struct {
		name                 string
		err                  error
		notFound, badRequest bool
	}{
		{"404", hide(http.StatusNotFound), true, false},
		{"400", hide(http.StatusBadRequest), false, true},
		{"401", hide(http.StatusUnauthorized), false, false},
		{"not the broker's answer", &hiddenError{msg: "x", err: errors.New("EOF")}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isNotFound(tc.err); got != tc.notFound {
				t.Errorf("isNotFound = %v, want %v", got, tc.notFound)
			}
			if got := isBadRequest(tc.err); got != tc.badRequest {
				t.Errorf("isBadRequest = %v, want %v", got, tc.badRequest)
			}
		})
	}
}
