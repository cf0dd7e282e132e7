package deployed

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/testenv"
)

// createSets creates a MySQL, a Ceph and a RabbitMQ set in apps, with the
// Secrets they name; it returns them and the Ceph admin key.
func createSets(t *testing.T, srv *servers) ([]*v1.CredentialSet, string) {
	ctx, k8s, my, cph, rmq := context.Background(), srv.k8s, srv.my, srv.cph, srv.rmq
	// The three sets, created by their author (here the admin) in apps.
	secret := func(ns, name string, data map[string]string) {
		t.Helper()
		if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}); err != nil {
			t.Fatal(err)
		}
	}

	// MySQL: one application user through an admin rekey never rotates.
	inst := my.Primary
	if err := inst.Exec("CREATE USER 'ops-admin'@'%' IDENTIFIED BY 'ops-admin-password-for-tests'",
		"GRANT ALL PRIVILEGES ON *.* TO 'ops-admin'@'%' WITH GRANT OPTION"); err != nil {
		t.Fatal(err)
	}
	mysqlCA, err := testenv.MySQLCAPEM()
	if err != nil {
		t.Fatal(err)
	}
	secret(appNamespace, "ops-admin", map[string]string{"password": "ops-admin-password-for-tests"})
	secret(appNamespace, "mysql-ca", map[string]string{"ca.crt": string(mysqlCA)})
	sets := []*v1.CredentialSet{{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: "app"},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{
				Instances:      v1.MySQLInstances{Hosts: my.Addrs()},
				Admin:          v1.MySQLAdmin{User: "ops-admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "ops-admin", Key: "password"}},
				TLSCASecretRef: &v1.SecretKeyRef{Name: "mysql-ca", Key: "ca.crt"},
				Users:          []v1.MySQLUser{{Name: "app"}},
			},
			Distribution: []v1.SecretTarget{{Namespace: appNamespace, Name: "app-db"}},
		},
	}}

	// Ceph: a daemon-style key rotated in place, rekey acting as its own
	// admin entity (not client.admin, which the harness keeps).
	out, err := cph.CLI(ctx, "auth", "get-or-create", "client.rekey-admin", "mon", "allow *", "osd", "allow *", "mds", "allow *", "mgr", "allow *")
	if err != nil {
		t.Fatal(err)
	}
	adminKR, err := ceph.ParseKeyring(string(out))
	if err != nil {
		t.Fatal(err)
	}
	secret(appNamespace, "ceph-admin", map[string]string{"keyring": adminKR.String()})
	sets = append(sets, &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: "rgw"},
		Spec: v1.CredentialSetSpec{
			Ceph: &v1.CephSpec{
				Monitors: []string{cph.MonAddr},
				Admin:    v1.CephAdmin{Entity: "client.rekey-admin", KeyringSecretRef: v1.SecretKeyRef{Name: "ceph-admin", Key: "keyring"}},
				Strategy: v1.CephInPlace,
				Entities: []v1.CephEntity{{Name: "client.rgw.a", Caps: v1.CephCaps{Mon: "allow rw", OSD: "allow rwx"}}},
			},
			Distribution: []v1.SecretTarget{{Namespace: appNamespace, Name: "rgw-keys"}},
		},
	})

	// RabbitMQ: a user per generation, over https verified with the CA.
	secret(appNamespace, "rabbit-admin", map[string]string{"username": rmq.AdminUser, "password": rmq.AdminPassword})
	secret(appNamespace, "rabbit-ca", map[string]string{"ca.crt": string(rmq.CAPEM)})
	sets = append(sets, &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: "nova"},
		Spec: v1.CredentialSetSpec{
			RabbitMQ: &v1.RabbitMQSpec{
				Endpoint: rmq.MgmtURL,
				TLS:      &v1.RabbitMQTLS{CASecretRef: &v1.SecretKeyRef{Name: "rabbit-ca", Key: "ca.crt"}},
				Admin:    v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "rabbit-admin"}},
				User: v1.RabbitMQUser{Base: "nova",
					Permissions: []v1.RabbitMQPermission{{Vhost: "/", Configure: ".*", Write: ".*", Read: ".*"}}},
				TransportURL: &v1.RabbitMQTransportURL{Hosts: []string{rmq.AMQPAddr()}},
			},
			Distribution: []v1.SecretTarget{{Namespace: appNamespace, Name: "nova-transport"}},
		},
	})
	for _, cs := range sets {
		if err := k8s.Create(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	return sets, adminKR.Key
}

// rotateAndDiscard waits for the sets' first generation, rotates and
// discards each, and checks on the servers that each new credential works
// and each old one is refused. It returns the credentials by name.
func rotateAndDiscard(t *testing.T, srv *servers, run *podRun, sets []*v1.CredentialSet) map[string]string {
	ctx, k8s, cph, rmq, inst := context.Background(), srv.k8s, srv.cph, srv.rmq, srv.my.Primary
	for _, cs := range sets {
		waitPhase(t, run, k8s, cs.Name, v1.PhaseIdle, 1)
	}
	before := map[string]map[string][]byte{}
	for _, s := range []string{"app-db", "rgw-keys", "nova-transport"} {
		before[s] = secretData(t, k8s, appNamespace, s)
	}
	if len(before["app-db"]["APP_PASSWORD"]) == 0 || len(before["nova-transport"]["password"]) == 0 {
		t.Fatal("app-db or nova-transport holds no credential after provisioning")
	}
	oldCeph, err := cph.Key(ctx, "client.rgw.a")
	if err != nil {
		t.Fatal(err)
	}
	if string(before["rgw-keys"]["client.rgw.a.key"]) != oldCeph {
		t.Fatal("the distribution Secret does not hold the mon's key of client.rgw.a")
	}

	// One rotation each, requested as kubectl rekey rotate does, then
	// (discardPolicy Manual) the discard, as kubectl rekey discard does.
	annotate := func(name, key string) {
		t.Helper()
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"r1"}}}`, key))
		if err := k8s.Patch(ctx, &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: name}},
			client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	rotateStart := time.Now()
	for _, cs := range sets {
		annotate(cs.Name, engine.RotateAnnotation)
	}
	for _, cs := range sets {
		waitPhase(t, run, k8s, cs.Name, v1.PhaseDistributed, 1)
	}
	after := map[string]map[string][]byte{}
	for _, s := range []string{"app-db", "rgw-keys", "nova-transport"} {
		after[s] = secretData(t, k8s, appNamespace, s)
	}
	// Before the discard, old and new both work on MySQL and RabbitMQ (no
	// lockout); an in-place Ceph key has no overlap by design.
	if err := inst.CanLogin("app", string(before["app-db"]["APP_PASSWORD"])); err != nil {
		t.Fatalf("MySQL refuses app's old password before the discard: %v", err)
	}
	if err := inst.CanLogin("app", string(after["app-db"]["APP_PASSWORD"])); err != nil {
		t.Fatalf("MySQL refuses app's new password before the discard: %v", err)
	}
	if err := rmq.CanAuthenticate(string(before["nova-transport"]["username"]), string(before["nova-transport"]["password"])); err != nil {
		t.Fatalf("RabbitMQ refuses the old user before the discard: %v", err)
	}
	for _, cs := range sets {
		annotate(cs.Name, engine.DiscardAnnotation)
	}
	for _, cs := range sets {
		waitPhase(t, run, k8s, cs.Name, v1.PhaseIdle, 2)
	}
	t.Logf("three rotations, rotate to discard, complete in %s", time.Since(rotateStart).Round(time.Second))
	for _, s := range []string{"app-db", "rgw-keys", "nova-transport"} {
		if now := secretData(t, k8s, appNamespace, s); !reflect.DeepEqual(now, after[s]) {
			t.Fatalf("%s changed at the discard", s)
		}
	}

	// MySQL: the new password logs in, the old one no longer does.
	oldPw, newPw := string(before["app-db"]["APP_PASSWORD"]), string(after["app-db"]["APP_PASSWORD"])
	if newPw == "" || newPw == oldPw {
		t.Fatal("app-db holds no new password after the rotation")
	}
	if err := inst.CanLogin("app", newPw); err != nil {
		t.Fatalf("MySQL refuses app's new password: %v", err)
	}
	if inst.CanLogin("app", oldPw) == nil {
		t.Fatal("MySQL still accepts app's old password after the discard")
	}

	// Ceph: the Secret holds what the mon holds; the old key is refused.
	newCeph, err := cph.Key(ctx, "client.rgw.a")
	if err != nil {
		t.Fatal(err)
	}
	if newCeph == oldCeph || string(after["rgw-keys"]["client.rgw.a.key"]) != newCeph {
		t.Fatal("rgw-keys does not hold client.rgw.a's new key from the mon")
	}
	if !cephAuthenticates(t, cph, "client.rgw.a", newCeph) {
		t.Fatal("client.rgw.a's new key does not authenticate")
	}
	if cephAuthenticates(t, cph, "client.rgw.a", oldCeph) {
		t.Fatal("client.rgw.a's old key still authenticates after an in-place rotation")
	}

	// RabbitMQ: the new generation's user logs in over AMQP, the old
	// generation's user is gone.
	oldU, oldP := string(before["nova-transport"]["username"]), string(before["nova-transport"]["password"])
	newU, newP := string(after["nova-transport"]["username"]), string(after["nova-transport"]["password"])
	if newU == "" || newU == oldU {
		t.Fatalf("nova-transport names user %q after the rotation, %q before", newU, oldU)
	}
	if err := rmq.CanAuthenticate(newU, newP); err != nil {
		t.Fatalf("RabbitMQ refuses %s with the distributed password: %v", newU, err)
	}
	waitFor(t, run, time.Minute, "the old RabbitMQ user "+oldU+" retired", func() (bool, string) {
		err := rmq.CanAuthenticate(oldU, oldP)
		return err != nil, fmt.Sprint(err)
	})
	t.Logf("MySQL app, Ceph client.rgw.a, RabbitMQ %s → %s: each new credential works on its server, each old one is refused", oldU, newU)
	return map[string]string{"old MySQL password": oldPw, "new MySQL password": newPw, "old Ceph key": oldCeph,
		"new Ceph key": newCeph, "old RabbitMQ password": oldP, "new RabbitMQ password": newP}
}

func secretData(t *testing.T, k8s client.Client, ns, name string) map[string][]byte {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s.Data
}

// waitPhase waits until the set is in phase at generation gen.
func waitPhase(t *testing.T, run *podRun, k8s client.Client, name string, phase v1.RotationPhase, gen int64) {
	t.Helper()
	waitFor(t, run, 3*time.Minute, fmt.Sprintf("%s %s at generation %d", name, phase, gen), func() (bool, string) {
		cs := &v1.CredentialSet{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: appNamespace, Name: name}, cs); err != nil {
			return false, err.Error()
		}
		var conds []string
		for _, c := range cs.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
		}
		return cs.Status.Phase == phase && cs.Status.KeyGeneration == gen,
			fmt.Sprintf("phase %q generation %d %s", cs.Status.Phase, cs.Status.KeyGeneration, strings.Join(conds, " "))
	})
}

// waitFor polls cond every 250 ms; the container ending early fails at once.
func waitFor(t *testing.T, run *podRun, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		if state != "" {
			last = state
		}
		if gone, err := run.exited(); gone {
			logText, _ := os.ReadFile(run.log)
			t.Fatalf("the container exited (%v) while waiting for %s (last: %s); its log:\n%s", err, what, last, tail(string(logText), 40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// cephAuthenticates reports whether the mon accepts key for entity.
func cephAuthenticates(t *testing.T, c *testenv.Ceph, entity, key string) bool {
	t.Helper()
	ok, err := c.Authenticates(context.Background(), entity, key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
