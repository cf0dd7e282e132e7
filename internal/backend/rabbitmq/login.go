package rabbitmq

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// notManagementUser is the management API's reason for refusing a user
// whose password it has just accepted but who has no management tag.
// RabbitMQ checks the password first (Login failed otherwise), so this
// reason proves the password as well as a 200 does: rotated users rarely
// carry a management tag, and the management endpoint is the one address
// rekey is sure to reach (AMQP listeners may be elsewhere, or TLS-only).
const notManagementUser = "Not management user"

// authenticates reports whether the broker accepts password for user. It
// is false only when the broker says so; any other failure is an error,
// and callers then change nothing.
func (b *Backend) authenticates(ctx context.Context, user, password string) (bool, error) {
	reqCtx, cancel := context.WithTimeout(ctx, b.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, b.endpoint+"/api/whoami", nil)
	if err != nil {
		return false, err
	}
	req.SetBasicAuth(user, password)
	res, err := b.transport.RoundTrip(req)
	if err != nil {
		// The caller's ctx, not reqCtx: our own timeout means unreachable.
		return false, b.apiError(ctx, "log in as "+user, &url.Error{Op: "Get", URL: req.URL.String(), Err: err})
	}
	defer res.Body.Close()
	var body struct {
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}
	_ = json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&body)
	switch {
	case res.StatusCode == http.StatusOK:
		return true, nil
	case res.StatusCode == http.StatusUnauthorized:
		return body.Reason == notManagementUser, nil
	case res.StatusCode >= 502 && res.StatusCode <= 504:
		return false, b.unreachable(fmt.Errorf("log in as %s: HTTP %d from a gateway", user, res.StatusCode))
	}
	// The status line's text and the body are the server's: only the
	// code is repeated (see apiError).
	return false, fmt.Errorf("log in as %s on %s: unexpected answer (HTTP %d)", user, b.endpoint, res.StatusCode)
}
