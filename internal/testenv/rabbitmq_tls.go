package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
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

// newTestPKI writes ca.pem, server.pem and server.key into dir.
func newTestPKI(dir string) (*testPKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "rekey test CA " + filepath.Base(dir)},
		NotBefore:             now.Add(-time.Hour), // the node's clock may be a little behind
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	p := &testPKI{
		caPEM:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		caFile:   filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "server.pem"),
		keyFile:  filepath.Join(dir, "server.key"),
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{p.caFile, p.caPEM, 0o644},
		{p.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), 0o644},
		{p.keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600},
	} {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
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
