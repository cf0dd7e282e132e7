package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// testPKI is a CA made for one node at its start and a server certificate
// it signed for 127.0.0.1 and localhost. Nothing is shared between nodes
// or runs, so no test trusts a certificate it did not make itself.
type testPKI struct {
	caPEM                     []byte
	caFile, certFile, keyFile string
}

// newTestPKI makes a CA for one node and writes it, with the server
// certificate and key it signed, into dir.
func newTestPKI(dir string) (*testPKI, error) {
	ca, err := newTestCA("rekey test CA " + filepath.Base(dir))
	if err != nil {
		return nil, err
	}
	p := &testPKI{
		caPEM:    ca.caPEM,
		caFile:   filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "server.pem"),
		keyFile:  filepath.Join(dir, "server.key"),
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{p.caFile, ca.caPEM, 0o644},
		{p.certFile, ca.certPEM, 0o644},
		{p.keyFile, ca.keyPEM, 0o600},
	} {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// tlsConfig trusts this node's CA alone, as a client given caSecretRef
// would.
func (m *RabbitMQ) tlsConfig() *tls.Config {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(m.CAPEM) {
		panic(errors.New("rabbitmq: the test CA does not parse")) // we made it
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// Transport is an HTTP transport that verifies the management API's
// certificate against the node's CA.
func (m *RabbitMQ) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = m.tlsConfig()
	return t
}

// dialAMQP connects to the plain AMQP listener, or with TLS to the AMQPS
// one, verifying the certificate as a consumer given the CA would.
func (m *RabbitMQ) dialAMQP(useTLS bool) (net.Conn, error) {
	if !useTLS {
		return net.DialTimeout("tcp", m.AMQPAddr(), 5*time.Second)
	}
	cfg := m.tlsConfig()
	cfg.ServerName = "127.0.0.1"
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", m.AMQPSAddr(), cfg)
	if err != nil {
		return nil, fmt.Errorf("amqps: %w", err)
	}
	return c, nil
}
