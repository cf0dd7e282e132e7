package e2e

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestLockedAdminNotRetried: a set whose admin account is locked by
// FAILED_LOGIN_ATTEMPTS (MySQL error 3955) on the real mysqld says so —
// AuthenticationFailed naming the account, the Secret key and the fix —
// and the manager does not log in again while nothing changed: no refused
// login is added to the server's count, where a retry on a timer would
// keep the account locked. Once a person unlocks it and annotates the
// set, rekey logs in and provisions.
func TestLockedAdminNotRetried(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{NoReplicas: true})
	startManager(t, cp.Config)
	ns := newNamespace(t)
	p := c.Primary
	const right = "locked-admin-right-password-0123456789"
	onEachInstance(t, c.Instances(),
		"CREATE USER 'lockadm'@'%' IDENTIFIED BY '"+right+"' FAILED_LOGIN_ATTEMPTS 1 PASSWORD_LOCK_TIME 1",
		"GRANT ALL PRIVILEGES ON *.* TO 'lockadm'@'%' WITH GRANT OPTION")
	if err := p.CanLogin("lockadm", "someone-elses-wrong-password"); err == nil {
		t.Fatal("a wrong password logged in")
	}
	refusedLogins := func() int {
		v, err := p.QueryString("SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME='Aborted_connects'")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(v)
		return n
	}
	createSecret(t, ns, "lockadm", map[string]string{"password": right})
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "locked"}, Spec: v1.CredentialSetSpec{
		MySQL: &v1.MySQLSpec{
			Instances:      v1.MySQLInstances{Hosts: c.Addrs()},
			Admin:          v1.MySQLAdmin{User: "lockadm", PasswordSecretRef: &v1.SecretKeyRef{Name: "lockadm", Key: "password"}},
			TLSCASecretRef: mysqlCASecret(t, ns, "mysql-ca"),
			Users:          []v1.MySQLUser{{Name: "lockapp"}},
		},
		Distribution: []v1.SecretTarget{{Namespace: ns, Name: "locked-db"}},
	}}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	msg := ""
	eventually(t, time.Minute, "Degraded AuthenticationFailed", func() (bool, string) {
		d := condition(getSet(t, ns, "locked"), reason.CondDegraded)
		if d == nil {
			return false, "no Degraded condition"
		}
		msg = d.Message
		return d.Status == metav1.ConditionTrue && d.Reason == string(reason.AuthenticationFailed), d.Reason + ": " + d.Message
	})
	t.Logf("Degraded: %s", msg)
	mustContain(t, "the condition", msg, "MySQL error 3955", "locked", "lockadm", p.Addr(), "Secret lockadm key password", "ACCOUNT UNLOCK", "kubectl annotate")
	mustContain(t, "the Warning", waitEvent(t, ns, "locked", string(reason.AuthenticationFailed)), "MySQL error 3955", "lockadm")

	before := refusedLogins()
	holdsFor(t, 15*time.Second, "no login as the locked admin while nothing changed", func() (bool, string) {
		n := refusedLogins() - before
		return n == 0, fmt.Sprintf("%d refused logins since the condition", n)
	})

	onEachInstance(t, c.Instances(), "ALTER USER 'lockadm'@'%' ACCOUNT UNLOCK")
	annotate(t, ns, "locked", "rekey.io/retry", "1")
	waitPhase(t, ns, "locked", v1.PhaseIdle, 1)
	if err := p.CanLogin("lockapp", string(secretData(t, ns, "locked-db")["LOCKAPP_PASSWORD"])); err != nil {
		t.Fatalf("the provisioned user does not log in with the distributed password: %v", err)
	}
}
