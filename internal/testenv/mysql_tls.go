package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"sync"

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
