package e2e

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// reflectCanary stands for what a service only the manager's network
// position reaches would answer: it must never reach the set's tenant.
const reflectCanary = "CANARY-only-the-manager-reaches-this-4b7e"

// TestNothingRemoteReflected points every backend at loopback stand-ins
// for hostile or internal endpoints — a management API that echoes the
// request's body and Authorization header (with each status it could
// answer), a TCP service that sends a banner, a server that greets a MySQL
// client with an error message of its own — and then reads everything the
// tenant can read of the sets (status and its conditions, Events): neither
// the canary, nor any password or key the sets hold, nor the
// Authorization header is there. A refused admin is AuthenticationFailed.
func TestNothingRemoteReflected(t *testing.T) {
	c := testenv.CephForTest(t) // the CLI the manager runs, against a stand-in
	startManager(t, cp.Config, withCephWorkDir(c))
	ns := newNamespace(t)
	ctx := ctxT(t)
	t.Cleanup(func() {
		// The stand-ins never let a RabbitMQ set's finalizer delete its
		// users: drop the finalizers now rather than wait for the
		// namespace cleanup's bound.
		var list v1.CredentialSetList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Error(err)
			return
		}
		for i := range list.Items {
			keepForScan(cp.Config.Host, &list.Items[i])
			_ = k8s.Delete(context.Background(), &list.Items[i])
		}
		if left := waitSetsGone(k8s, ns, 30*time.Second, dropAllFinalizers); len(left) > 0 {
			t.Errorf("sets %v left", left)
		}
	})

	banner := serveTCP(t, func(conn net.Conn) { fmt.Fprintf(conn, "SSH-2.0-%s\r\n", reflectCanary) })
	mysqlGreeting := serveTCP(t, func(conn net.Conn) {
		// A MySQL ERR packet in place of the greeting, as a server that
		// refuses the client's host sends it, its message the canary.
		msg := "Host '10.1.2.3' is not allowed to connect: " + reflectCanary
		payload := append([]byte{0xff, 0, 0}, msg...)
		binary.LittleEndian.PutUint16(payload[1:], 1130)
		hdr := []byte{byte(len(payload)), byte(len(payload) >> 8), byte(len(payload) >> 16), 0}
		_, _ = conn.Write(append(hdr, payload...))
	})
	echo := func(code int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Echo", reflectCanary+" "+r.Header.Get("Authorization"))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			echoed := reflectCanary + " " + r.Header.Get("Authorization") + " " + string(body)
			_ = json.NewEncoder(w).Encode(map[string]string{
				"error": echoed, "reason": echoed, "rabbitmq_version": echoed, "name": echoed})
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}

	apiServer := strings.TrimSuffix(cp.Config.Host, "/")
	if !strings.HasPrefix(apiServer, "https://") {
		t.Fatalf("API server at %q, want https://host:port", apiServer)
	}
	const adminPassword = "reflect-admin-password-never-shown"
	secrets := []string{adminPassword, base64.StdEncoding.EncodeToString([]byte("admin:" + adminPassword))}
	createSecret(t, ns, "admin", map[string]string{"username": "admin", "password": adminPassword})
	cephKey := "AQBzs2lnAAAAABAAq7JX3yq9nT1k8YxM9j0Ycw=="
	createSecret(t, ns, "ceph-admin", map[string]string{"keyring": ceph.Keyring{Entity: "client.admin", Key: cephKey}.String()})
	secrets = append(secrets, cephKey)

	mysqlSet := func(name, addr string) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{
				Instances: v1.MySQLInstances{Hosts: []string{addr}},
				Admin:     v1.MySQLAdmin{User: "ops-admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "admin", Key: "password"}},
				Users:     []v1.MySQLUser{{Name: "app"}},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-out"}},
		}}
	}
	rabbitSet := func(name, endpoint string, skipVerify ...bool) *v1.CredentialSet {
		var tls *v1.RabbitMQTLS
		if len(skipVerify) > 0 {
			tls = &v1.RabbitMQTLS{InsecureSkipVerify: true}
		}
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.CredentialSetSpec{
			RabbitMQ: &v1.RabbitMQSpec{
				Endpoint: endpoint, AllowPlaintextHTTP: tls == nil, TLS: tls,
				Admin: v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "admin"}},
				User:  v1.RabbitMQUser{Base: name, Permissions: []v1.RabbitMQPermission{{Vhost: "/", Configure: ".*", Write: ".*", Read: ".*"}}},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-out"}},
		}}
	}
	cephSet := func(name, mon string) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.CredentialSetSpec{
			Ceph: &v1.CephSpec{
				Monitors: []string{mon},
				Admin:    v1.CephAdmin{KeyringSecretRef: v1.SecretKeyRef{Name: "ceph-admin", Key: "keyring"}},
				Strategy: v1.CephOverlapping,
				Entities: []v1.CephEntity{{Name: "client." + name, Caps: v1.CephCaps{Mon: "allow r"}}},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-out"}},
		}}
	}
	postgresError := serveTCP(t, func(conn net.Conn) {
		// A PostgreSQL ErrorResponse in place of the server's first
		// answer, as a server refusing the login sends it, its message
		// the canary.
		msg := "SFATAL\x00C28P01\x00Mpassword authentication failed: " + reflectCanary + "\x00\x00"
		frame := append([]byte{'E', 0, 0, 0, 0}, msg...)
		binary.BigEndian.PutUint32(frame[1:], uint32(4+len(msg)))
		_, _ = conn.Write(frame)
	})
	postgresSet := func(name, addr string) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.CredentialSetSpec{
			Postgres: &v1.PostgresSpec{
				Hosts: []string{addr}, TLS: "Disable",
				Admin: v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "admin"}},
				Login: v1.PostgresLogin{Base: strings.ReplaceAll(name, "-", "_"), Group: "app_owner"},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-out"}},
		}}
	}
	sets := map[string]reason.Reason{} // name → the Degraded reason it must have ("" any)
	for _, tc := range []struct {
		cs   *v1.CredentialSet
		want reason.Reason
	}{
		{mysqlSet("mysql-banner", banner), ""},
		{mysqlSet("mysql-greeting", mysqlGreeting), reason.AuthenticationFailed},
		{rabbitSet("rabbit-banner", "http://"+banner), ""},
		{rabbitSet("rabbit-echo-200", echo(200)), ""},
		{rabbitSet("rabbit-echo-400", echo(400)), ""},
		{rabbitSet("rabbit-echo-401", echo(401)), reason.AuthenticationFailed},
		{rabbitSet("rabbit-echo-403", echo(403)), reason.PermissionDenied},
		{rabbitSet("rabbit-echo-500", echo(500)), ""},
		{cephSet("ceph-banner", "v2:"+banner), ""},
		{postgresSet("postgres-banner", banner), ""},
		{postgresSet("postgres-error", postgresError), reason.AuthenticationFailed},
		// The API server, which only the manager's position may reach: its
		// refusal's body names the user it saw and the path.
		{rabbitSet("rabbit-apiserver", apiServer, true), ""},
		{mysqlSet("mysql-apiserver", strings.TrimPrefix(apiServer, "https://")), ""},
	} {
		if err := k8s.Create(ctx, tc.cs); err != nil {
			t.Fatal(err)
		}
		sets[tc.cs.Name] = tc.want
	}

	// Every set has failed and said so, in its condition and in an Event.
	waitFor(t, 3*time.Minute, "every set Degraded with a Warning Event", func() (bool, string) {
		warned := map[string]bool{}
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Type == "Warning" {
				warned[e.Regarding.Name] = true
			}
		}
		for name, want := range sets {
			d := condition(getSet(t, ns, name), "Degraded")
			if d == nil || d.Status != metav1.ConditionTrue || !warned[name] {
				return false, name + " not yet Degraded with a Warning"
			}
			if want != "" && d.Reason != string(want) {
				return false, fmt.Sprintf("%s Degraded %s, want %s: %s", name, d.Reason, want, d.Message)
			}
		}
		return true, ""
	})

	// kubectl rekey check on each: its answer lands in status.check and in
	// what the plugin prints, both read below.
	var surfaces []string
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for name := range sets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := rekeyCheck(t, ns, name)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && !strings.Contains(err.Error(), " failed: do what FIX says") {
				t.Errorf("kubectl rekey check %s got no answer: %v", name, err)
			}
			surfaces = append(surfaces, out)
			if err != nil {
				surfaces = append(surfaces, err.Error())
			}
		}()
	}
	wg.Wait()

	// Everything the tenant reads of them.
	var setList v1.CredentialSetList
	if err := k8s.List(ctx, &setList, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cs := range setList.Items {
		b, _ := json.Marshal(cs)
		surfaces = append(surfaces, string(b))
		if d := condition(&cs, "Degraded"); d != nil {
			t.Logf("%s: %s: %s", cs.Name, d.Reason, d.Message)
		}
	}
	var events eventsv1.EventList
	if err := k8s.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		b, _ := json.Marshal(e)
		surfaces = append(surfaces, string(b))
	}
	all := strings.Join(surfaces, "\n")
	for _, bad := range append(secrets, reflectCanary, "10.1.2.3", "SSH-2.0", "system:anonymous", "forbidden:") {
		if strings.Contains(all, bad) {
			i := strings.Index(all, bad)
			t.Errorf("a tenant-readable surface holds %q: …%s…", bad, all[max(0, i-200):min(len(all), i+len(bad)+50)])
		}
	}
}

// serveTCP runs a loopback TCP service that answers each connection with
// answer and then closes it; it returns the service's host:port.
func serveTCP(t *testing.T, answer func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				answer(conn)
			}()
		}
	}()
	return l.Addr().String()
}
