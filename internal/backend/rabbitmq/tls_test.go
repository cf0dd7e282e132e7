package rabbitmq

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// A certificate the client cannot verify is a refusal naming the field to
// fix, not an outage; checked against a stand-in that answers the one call
// Version makes (the real node's https is used by every broker test).
func TestHTTPSEndpoint(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/overview" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"rabbitmq_version":"3.10.8"}`))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	ctx := context.Background()
	version := func(tls *v1.RabbitMQTLS, caPEM []byte) (string, error) {
		spec := validSpec()
		spec.Endpoint, spec.TLS = srv.URL, tls
		b, err := New(spec, testOwner, "admin", testAdminPassword, caPEM)
		if err != nil {
			t.Fatal(err)
		}
		return b.Version(ctx, nil)
	}

	if v, err := version(&v1.RabbitMQTLS{}, ca); err != nil || v != "3.10.8" {
		t.Errorf("with the CA: %q, %v", v, err)
	}
	if v, err := version(&v1.RabbitMQTLS{InsecureSkipVerify: true}, nil); err != nil || v != "3.10.8" {
		t.Errorf("without verification: %q, %v", v, err)
	}
	_, err := version(nil, nil)
	refused(t, err, string(reason.BackendError), "rabbitmq.tls.caSecretRef", testAdminPassword)
	if _, ok := engine.AsUnreachable(err); ok {
		t.Errorf("an untrusted certificate is no outage: %v", err)
	}
}
