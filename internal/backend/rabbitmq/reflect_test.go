package rabbitmq

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

const canary = "CANARY-51d2-internal-only"

// TestClassifyHTTP: each failure is told by its kind, from types and
// status codes only; the broker's body (canary) is never in the text.
func TestClassifyHTTP(t *testing.T) {
	body := func(code int) error {
		return rabbithole.ErrorResponse{StatusCode: code, Message: canary, Reason: canary}
	}
	for _, tc := range []struct {
		name string
		err  error
		kind httpKind
		says string
	}{
		{"401", errors.New("Error: API responded with a 401 Unauthorized"), httpAuth, "HTTP 401"},
		{"403", body(403), httpForbidden, "HTTP 403"},
		{"500", body(500), httpOther, "unexpected answer (HTTP 500)"},
		{"502", body(502), httpUnreachable, "HTTP 502"},
		{"404", body(404), httpOther, "HTTP 404"},
		{"not JSON", &json.SyntaxError{Offset: 1}, httpNotAPI, "not the JSON"},
		{"malformed HTTP", &url.Error{Op: "Get", URL: "http://x", Err: fmt.Errorf("net/http: malformed HTTP response %q", canary)}, httpNotAPI, "not HTTP"},
		{"refused", &url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, httpUnreachable, "connection refused"},
		{"timeout", &url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}}, httpUnreachable, "no answer in time"},
		{"no such host", &url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Err: &net.DNSError{Name: "x", Server: "10.96.0.10:53", IsNotFound: true}}}, httpUnreachable, "host not found"},
		{"something else", errors.New(canary), httpOther, "unexpected answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, text := classifyHTTP(tc.err)
			if kind != tc.kind || !strings.Contains(text, tc.says) || strings.Contains(text, canary) {
				t.Errorf("classifyHTTP = %d %q, want %d %q without the canary", kind, text, tc.kind, tc.says)
			}
		})
	}
}

// TestNothingRemoteReflected drives every backend call against stand-ins
// for what a set can point rekey at: a server echoing the request (body
// and Authorization header) with each status, one answering JSON full of
// the canary, and a TCP service sending a banner. No error holds the
// canary, the admin password, a rotated password or the Authorization
// header; the admin refused (401) is AuthenticationFailed.
func TestNothingRemoteReflected(t *testing.T) {
	echo := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Canary", canary)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error":%q,"reason":%q,"rabbitmq_version":%q,"name":%q}`,
				canary+" "+r.Header.Get("Authorization"), canary+string(b), canary, canary+" "+r.Header.Get("Authorization"))
		}
	}
	banner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer banner.Close()
	go func() {
		for {
			c, err := banner.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "SSH-2.0-%s\r\n", canary)
			c.Close()
		}
	}()
	endpoints := map[string]string{"banner": "http://" + banner.Addr().String()}
	for _, code := range []int{200, 400, 401, 403, 404, 500, 502} {
		srv := httptest.NewServer(echo(code))
		defer srv.Close()
		endpoints[fmt.Sprintf("echo %d", code)] = srv.URL
	}
	const adminPassword = "admin-password-never-shown"
	auth := base64.StdEncoding.EncodeToString([]byte("admin:" + adminPassword))
	ctx := context.Background()
	for name, ep := range endpoints {
		t.Run(name, func(t *testing.T) {
			spec := validSpec()
			spec.Endpoint, spec.AllowPlaintextHTTP = ep, true
			spec.Admin = v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "rabbit-admin"}}
			b, err := New(spec, testOwner, "admin", adminPassword, nil)
			if err != nil {
				t.Fatal(err)
			}
			b.Timeout = 5 * time.Second
			cur, pending := gen(t, b, 1), gen(t, b, 2)
			_, verr := b.Version(ctx, nil)
			cid, cerr := b.ClusterID(ctx)
			_, perr := b.Provision(ctx, cur)
			_, aerr := b.Apply(ctx, cur, pending, 2)
			calls := map[string]error{
				"Version": verr, "ClusterID": cerr, "Provision": perr, "Precheck": b.Precheck(ctx, cur), "Apply": aerr,
				"Verify": b.Verify(ctx, pending), "Retire": b.Retire(ctx, cur, pending), "Reset": b.Reset(ctx, cur),
				"Deprovision": b.Deprovision(ctx, cur), "Release": b.Release(ctx, cur), "ProveAdoption": b.ProveAdoption(ctx, cur[KeyPassword]),
			}
			if strings.Contains(cid, canary) {
				t.Errorf("ClusterID repeats the endpoint's answer: %q", cid)
			}
			for call, err := range calls {
				if err == nil {
					continue
				}
				msg := err.Error()
				t.Logf("%s: %s", call, msg)
				if r, ok := engine.AsRefusal(err); ok {
					msg += " " + r.Message
				}
				for _, bad := range []string{canary, adminPassword, auth, cur[KeyPassword], pending[KeyPassword]} {
					if strings.Contains(msg, bad) {
						t.Errorf("%s: the error repeats %q: %s", call, bad, msg)
					}
				}
				if name == "echo 401" && call != "Verify" && call != "ProveAdoption" && call != "Retire" { // those log in as the rotated user first
					if r, ok := engine.AsRefusal(err); !ok || r.Reason != string(reason.AuthenticationFailed) || !strings.Contains(r.Message, "Secret rabbit-admin") {
						t.Errorf("%s against a 401: %v, want AuthenticationFailed naming the admin Secret", call, err)
					}
				}
			}
		})
	}
}
