package mysql

import (
	"context"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"syscall"

	"golang.org/x/sync/errgroup"

	"rekey.io/rekey/internal/engine"
)

var _ engine.Checker = (*Backend)(nil)

// Check implements engine.Checker: per instance, whether it answers,
// whether its certificate verifies as the spec asks, its version, the
// admin's privileges and each user. It only reads: its session changes
// nothing but its own sql_log_bin, which is how the privilege for it is
// probed.
func (b *Backend) Check(ctx context.Context, in engine.CheckInput) []engine.Finding {
	if len(b.Instances) == 0 {
		return []engine.Finding{{Target: "spec.mysql.instances", Check: "instances", Message: "no instances: the StatefulSet has no replicas",
			Fix: "scale the cluster up"}}
	}
	out := make([][]engine.Finding, len(b.Instances))
	var g errgroup.Group
	g.SetLimit(max(b.Concurrency, 1))
	for i, inst := range b.Instances {
		g.Go(func() error {
			out[i] = b.checkInstance(ctx, inst, in)
			return nil
		})
	}
	_ = g.Wait()
	var all []engine.Finding
	for _, fs := range out {
		all = append(all, fs...)
	}
	return all
}

// checkInstance checks one instance; nothing after a failed connection.
func (b *Backend) checkInstance(ctx context.Context, inst Instance, in engine.CheckInput) []engine.Finding {
	db, conn, err := b.checkConnect(ctx, inst, b.adminPasswords(in.Current, in.Pending))
	fs := b.connectFindings(inst, err)
	if err != nil {
		return fs
	}
	defer db.Close()
	defer conn.Close()
	var raw string
	if err := conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&raw); err != nil {
		return append(fs, b.failed(inst, "version", err))
	}
	if rf := versionRefusal(inst.Name, raw); rf != nil {
		return append(fs, engine.Finding{Target: inst.Name, Check: "version", Message: rf.Message,
			Fix: "upgrade it to MySQL " + minVersion + " or newer"})
	}
	v, _, _ := strings.Cut(raw, "-")
	fs = append(fs, engine.Finding{Target: inst.Name, Check: "version", OK: true, Message: "MySQL " + quotableVersion(v)})
	accts, acctErr := checkAccounts(ctx, conn, b.Users)
	priv, err := b.checkPrivileges(ctx, conn, inst, accts, acctErr)
	if err != nil {
		return append(fs, b.failed(inst, "privileges", err))
	}
	fs = append(fs, priv...)
	if acctErr != nil {
		return fs // the privilege findings say why the users could not be read
	}
	return append(fs, b.checkUsers(ctx, inst, accts, in)...)
}

// checkConnect logs in as the admin with the first password MySQL
// accepts, on a plain connection (no session preparation: that is what
// the privilege check probes).
func (b *Backend) checkConnect(ctx context.Context, inst Instance, passwords []string) (*sql.DB, *sql.Conn, error) {
	var refused *loginFailure
	for _, pw := range passwords {
		if pw == "" {
			continue
		}
		db, err := b.transport.open(inst, b.AdminUser, pw)
		if err != nil {
			return nil, nil, err
		}
		db.SetMaxOpenConns(1)
		var conn *sql.Conn
		err = connect(ctx, func(ctx context.Context) (err error) {
			conn, err = db.Conn(ctx)
			return err
		})
		if err == nil {
			return db, conn, nil
		}
		db.Close()
		lf, ok := asLoginFailure(inst, b.AdminUser, err)
		if !ok {
			return nil, nil, err
		}
		refused = lf
		if lf.kind == failLocked {
			break // every try is one more failed login (openSession)
		}
	}
	if refused == nil {
		return nil, nil, errNoAdminPassword
	}
	return nil, nil, refused
}

var errNoAdminPassword = errors.New("no admin password")

// connectFindings are the reachable, tls and login findings of a
// connection attempt that ended with err (nil: logged in).
func (b *Backend) connectFindings(inst Instance, err error) []engine.Finding {
	t := b.transport
	reached := engine.Finding{Target: inst.Name, Check: "reachable", OK: true, Message: "MySQL answers at " + inst.Addr}
	tlsOK := engine.Finding{Target: inst.Name, Check: "tls", OK: true, Message: t.verifiedWords(inst)}
	login := engine.Finding{Target: inst.Name, Check: "login", OK: true, Message: "the admin user " + b.AdminUser + " logs in"}
	var lf *loginFailure
	switch {
	case err == nil:
		return []engine.Finding{reached, tlsOK, login}
	case errors.Is(err, errNoAdminPassword):
		login.OK, login.Message, login.Fix = false, "rekey holds no password for the admin user "+b.AdminUser, "set spec.mysql.admin.passwordSecretRef to the Secret key that holds it"
		return []engine.Finding{login}
	case errors.As(err, &lf):
		login.OK, login.Message, login.Fix = false, lf.Error(), b.adminFix(lf)
		return []engine.Finding{reached, tlsOK, login}
	case certificateError(err):
		reached.Message = "something answers at " + inst.Addr
		msg, fix := b.tlsTrouble(inst, err)
		tlsOK.OK, tlsOK.Message, tlsOK.Fix = false, msg, fix
		return []engine.Finding{reached, tlsOK}
	}
	kind, text := explain(err)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		reached.OK, reached.Deferred = false, true
		reached.Message = fmt.Sprintf("nothing listens on %s (connection refused)", inst.Addr)
		reached.Fix = "start mysqld there, or correct the address in spec.mysql.instances"
	case kind == failUnreachable:
		reached.OK, reached.Deferred = false, true
		reached.Message = fmt.Sprintf("no answer from %s: %s", inst.Addr, text)
		reached.Fix = "check that mysqld runs there and that the manager's network reaches it (spec.mysql.instances)"
	case kind == failTLS:
		tlsOK.OK, tlsOK.Message = false, text
		tlsOK.Fix = "set spec.mysql.tls to Required (with spec.mysql.tlsCASecretRef naming the CA of the servers' certificates), or enable TLS on the server"
		return []engine.Finding{reached, tlsOK}
	default:
		reached.OK = false
		reached.Message = fmt.Sprintf("%s answers, but not as MySQL does: %s", inst.Addr, text)
		reached.Fix = "check that spec.mysql.instances names the MySQL servers' addresses and ports"
	}
	return []engine.Finding{reached}
}

// verifiedWords says how the connection's server is verified.
func (t transport) verifiedWords(inst Instance) string {
	if t.mode == TLSRequired {
		return "TLS, the certificate verified for " + t.verifiedName(inst)
	}
	return "not verified: spec.mysql.tls is " + t.mode + " (rekey warns about it with InsecureTransport)"
}

// autoGeneratedCN is the subject of the certificate mysqld makes for
// itself when it has none (auto_generate_certs): self-signed by a CA it
// also made, and without a subject alternative name.
var autoGeneratedCN = regexp.MustCompile(`^MySQL_Server_[0-9A-Za-z._-]*_Auto_Generated_Server_Certificate$`)

// autoGeneratedFix is what to do about mysqld's own certificate, which no
// CA a person keeps has signed and which holds no name a client verifies.
const autoGeneratedFix = "give mysqld a certificate signed by a CA you keep, with the instance's host name as a subject alternative name (ssl_cert and ssl_key, e.g. issued by cert-manager), and put that CA's certificate in the Secret key spec.mysql.tlsCASecretRef names; or opt out with spec.mysql.tls: SkipVerify, which still encrypts but accepts any certificate, so whoever can intercept the connection can pose as the server and learn the admin's and the users' passwords"

// tlsTrouble says what is wrong with an instance's certificate and what
// to do. It recognises mysqld's auto-generated certificate by its subject
// without repeating it: a set may point rekey at any TLS service.
func (b *Backend) tlsTrouble(inst Instance, err error) (msg, fix string) {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
	)
	t := b.transport
	switch {
	case errors.As(err, &unknown) && unknown.Cert != nil && autoGeneratedCN.MatchString(unknown.Cert.Subject.CommonName):
		return fmt.Sprintf("%s serves the certificate mysqld generates for itself, which no CA you hold signed, so rekey sends it no credentials", inst.Name), autoGeneratedFix
	case errors.As(err, &hostname) && hostname.Certificate != nil && len(hostname.Certificate.DNSNames) == 0 && len(hostname.Certificate.IPAddresses) == 0:
		return fmt.Sprintf("the certificate of %s holds no subject alternative name (mysqld's auto-generated one has none), and TLS clients verify only those: spec.mysql.tlsServerName cannot help", inst.Name), autoGeneratedFix
	case errors.As(err, &unknown):
		where := "create a Secret holding the CA certificate that signed it and name its key in spec.mysql.tlsCASecretRef"
		if ref := b.caRef; ref != nil {
			where = fmt.Sprintf("put the CA certificate that signed it in Secret %s key %s (spec.mysql.tlsCASecretRef)", ref.Name, ref.Key)
		}
		return fmt.Sprintf("the TLS certificate of %s is not trusted (signed by an unknown authority), so rekey sends it no credentials", inst.Name), where
	}
	if msg := t.explainTLS(inst, err); msg != "" {
		// explainTLS's text ends with what to fix, after its last colon.
		if i := strings.LastIndex(msg, ": "); i > 0 {
			return msg[:i], msg[i+2:]
		}
		return msg, "see the message"
	}
	return fmt.Sprintf("the TLS certificate of %s does not verify", inst.Name), "give the instance a certificate its CA signed for its host name"
}

// adminFix is what to do about a refused admin login.
func (b *Backend) adminFix(lf *loginFailure) string {
	where := "the password rekey holds for it"
	if ref := b.adminRef; ref != nil && b.AdminKey == "" {
		where = fmt.Sprintf("Secret %s key %s (spec.mysql.admin.passwordSecretRef)", ref.Name, ref.Key)
	}
	if lf.kind == failLocked {
		return fmt.Sprintf("make sure %s is right, then unlock the account on the server (ALTER USER ... ACCOUNT UNLOCK)", where)
	}
	return fmt.Sprintf("put the admin's working password in %s, or fix the account on the server", where)
}

// failed is a finding for a query that failed in rekey's words.
func (b *Backend) failed(inst Instance, check string, err error) engine.Finding {
	_, text := explain(err)
	return engine.Finding{Target: inst.Name, Check: check, Message: "could not be read: " + text,
		Fix: "run kubectl rekey check again; if it persists, see the manager's log"}
}

// checkAccounts reads the users' rows; an error is returned as it is, for
// the privilege check to tell a denial.
func checkAccounts(ctx context.Context, conn *sql.Conn, users []User) (map[string]account, error) {
	out := map[string]account{}
	for _, u := range users {
		var dual sql.NullInt64
		var owner sql.NullString
		err := conn.QueryRowContext(ctx,
			"SELECT JSON_CONTAINS_PATH(COALESCE(User_attributes, '{}'), 'one', '$.additional_password'), "+
				"JSON_UNQUOTE(JSON_EXTRACT(COALESCE(User_attributes, '{}'), "+ownerPath+")) FROM mysql.user WHERE User=? AND Host=?",
			u.Name, u.Host).Scan(&dual, &owner)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, err
		default:
			out[u.String()] = account{exists: true, dual: dual.Int64 == 1, owner: owner.String}
		}
	}
	return out, nil
}

// checkUsers says of each user on one instance whether it is there with
// the password rekey holds, will be created, or cannot be adopted.
func (b *Backend) checkUsers(ctx context.Context, inst Instance, accts map[string]account, in engine.CheckInput) []engine.Finding {
	out := make([]engine.Finding, len(b.Users))
	var g errgroup.Group
	g.SetLimit(8)
	for i, u := range b.Users {
		g.Go(func() error {
			out[i] = b.checkUser(ctx, inst, u, accts[u.String()], in)
			return nil
		})
	}
	_ = g.Wait()
	return out
}

func (b *Backend) checkUser(ctx context.Context, inst Instance, u User, a account, in engine.CheckInput) engine.Finding {
	f := engine.Finding{Target: inst.Name, Check: "user " + u.String(), OK: true}
	pw := in.Current[u.Key]
	switch {
	case !a.exists:
		f.Message = "missing: rekey creates it with its grants"
		return f
	case pw == "":
		f.OK, f.Message = false, "exists, and rekey holds no password for it"
		f.Fix = fmt.Sprintf("put its password in the adoptSecretRef Secret under key %s, or drop the user and let rekey create it", u.Key)
		return f
	case a.dual && in.Pending == nil:
		f.OK, f.Deferred, f.Message = false, true, "has a secondary password rekey did not set"
		f.Fix = "reset it to the current password (ALTER USER ... IDENTIFIED BY, then ALTER USER ... DISCARD OLD PASSWORD; kubectl rekey recover does this)"
		return f
	}
	if !u.loginCheckable() {
		f.Message = "exists"
		return f
	}
	err := checkLogin(ctx, b.transport, inst, u.Name, pw)
	switch {
	case err == nil:
		f.Message = "exists and accepts the password rekey holds"
	case isLoginRefused(err) && in.Pending != nil && checkLogin(ctx, b.transport, inst, u.Name, in.Pending[u.Key]) == nil:
		f.Message = "exists and accepts the pending password of the rotation"
	case isLoginRefused(err):
		f.OK, f.Message = false, "exists and refuses the password rekey holds for it"
		f.Fix = fmt.Sprintf("put its password in the adoptSecretRef Secret under key %s and delete that key from the source Secret, or set the password on the server back", u.Key)
	default:
		_, text := explain(err)
		if rf, ok := engine.AsRefusal(err); ok {
			text = rf.Message
		}
		f.OK, f.Message = false, "its login could not be checked: "+text
		f.Fix = "see the message"
	}
	return f
}
