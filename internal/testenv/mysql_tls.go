package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Every mysqld the harness starts serves TLS with a certificate signed by
// one test CA, made once per test process, as a cluster manager's own CA
// (MOCO's, cert-manager's) would sign its instances'. Fixtures put
// MySQLCAPEM in a Secret so that rekey verifies the servers as it does by
// default. The certificate is valid for 127.0.0.1 and localhost, the only
// names the harness's instances are reached by.

// MySQLTLSName is a name the instances' certificate holds, for sets that
// verify one fixed server name (spec.mysql.tlsServerName) instead of each
// instance's host.
const MySQLTLSName = "localhost"

// testCA is a CA and the server certificate it signed, as PEM.
type testCA struct {
	caPEM, certPEM, keyPEM []byte
}

var (
	mysqlCAOnce sync.Once
	mysqlCA     *testCA
	mysqlCAErr  error
)

func harnessCA() (*testCA, error) {
	mysqlCAOnce.Do(func() {
		mysqlCA, mysqlCAErr = newTestCA("rekey test MySQL CA")
		if mysqlCAErr == nil {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(mysqlCA.caPEM)
			// The harness's own connections verify the servers too: the
			// certificate is proven good before any test relies on it.
			mysqlCAErr = mysql.RegisterTLSConfig(harnessTLS, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		}
	})
	return mysqlCA, mysqlCAErr
}

// harnessTLS names the harness's TLS config in go-sql-driver's registry
// (one entry for the process; rekey's own backend uses none).
const harnessTLS = "rekey-testenv"

// MySQLCAPEM is the PEM certificate of the CA that signed every harness
// mysqld's certificate.
func MySQLCAPEM() ([]byte, error) {
	ca, err := harnessCA()
	if err != nil {
		return nil, err
	}
	return ca.caPEM, nil
}

// OtherCAPEM is the PEM certificate of a CA that signed nothing the
// harness serves: what a set with the wrong CA holds.
func OtherCAPEM() ([]byte, error) {
	ca, err := newTestCA("rekey unrelated CA")
	if err != nil {
		return nil, err
	}
	return ca.caPEM, nil
}

// newTestCA makes a CA and a server certificate for 127.0.0.1 and
// localhost signed by it (ECDSA P-256: fast to make and to verify).
func newTestCA(cn string) (*testCA, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "rekey test mysqld"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(30 * 24 * time.Hour),
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &testCA{
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// writeTLSFiles puts the CA, certificate and key in the instance's folder
// (outside its data directory, so a re-initialisation keeps them) and
// returns mysqld's options naming them.
func (i *MySQLInstance) writeTLSFiles() ([]string, error) {
	ca, err := harnessCA()
	if err != nil {
		return nil, fmt.Errorf("test CA: %w", err)
	}
	host := filepath.Join(i.env.SidDir, i.dir)
	for name, data := range map[string][]byte{"ca.pem": ca.caPEM, "server-cert.pem": ca.certPEM, "server-key.pem": ca.keyPEM} {
		if err := os.WriteFile(filepath.Join(host, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return []string{"--ssl-ca=" + i.dir + "/ca.pem", "--ssl-cert=" + i.dir + "/server-cert.pem", "--ssl-key=" + i.dir + "/server-key.pem"}, nil
}
