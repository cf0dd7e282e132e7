package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/plugin"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// rekeyCheck runs kubectl rekey check through the plugin, as a user would.
func rekeyCheck(t testing.TB, ns, name string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	args := []string{"--kubeconfig", cp.Kubeconfig, "-n", ns, "check", name, "--timeout", "2m"}
	if code := plugin.Main(context.Background(), args, plugin.Options{Out: &out, Err: &errb}); code != 0 {
		return out.String(), fmt.Errorf("%s", strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// failedRow is the check's table row that failed for target and check.
func failedRow(t testing.TB, out, target, check string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && strings.HasPrefix(l, target) && strings.Contains(l, " "+check+" ") && strings.Contains(l, "FAILED") {
			return l
		}
	}
	t.Fatalf("no failed %s check of %s in:\n%s", check, target, out)
	return ""
}

func deployment(t testing.TB, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: name + ":1"}}},
			},
		},
	}
	if err := k8s.Create(ctxT(t), d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCheck: kubectl rekey check, run by a user against the real API
// server and the real manager, catches on a real mysqld a closed port, a
// certificate of an untrusted CA, an admin account lacking one privilege
// and a consumer that does not exist, each with its exact fix; and a
// rotation requested (kubectl rekey rotate --wait, which gives up on the
// refusal at once) on a set that fails them is refused with the list,
// held without retries while only its consumers change and time passes,
// and started once check passes.
func TestCheck(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{NoReplicas: true})
	ns := newNamespace(t)
	writes := watchSetWrites(t, ns)
	startManager(t, cp.Config)
	p := c.Primary
	prepareAdmin(t, c.Instances(), "ops-admin", "ops-admin-password-for-tests")
	// Every privilege rekey needs but SELECT on mysql.user.
	onEachInstance(t, c.Instances(), "CREATE USER 'lim-admin'@'%' IDENTIFIED BY 'lim-admin-password-for-tests'",
		"GRANT CREATE USER, REPLICATION CLIENT, SYSTEM_VARIABLES_ADMIN ON *.* TO 'lim-admin'@'%'",
		"GRANT SELECT ON performance_schema.* TO 'lim-admin'@'%'")
	createSecret(t, ns, "lim-admin", map[string]string{"password": "lim-admin-password-for-tests"})
	other, err := testenv.OtherCAPEM()
	if err != nil {
		t.Fatal(err)
	}
	createSecret(t, ns, "other-ca", map[string]string{"ca.crt": string(other)})
	web := deployment(t, ns, "web")

	closed := freePort(t)
	sets := map[string]func(*v1.CredentialSet){
		"closed": func(cs *v1.CredentialSet) { cs.Spec.MySQL.Instances.Hosts = []string{closed} },
		"untrusted": func(cs *v1.CredentialSet) {
			cs.Spec.MySQL.TLSCASecretRef = &v1.SecretKeyRef{Name: "other-ca", Key: "ca.crt"}
		},
		"limited": func(cs *v1.CredentialSet) {
			cs.Spec.MySQL.Admin = v1.MySQLAdmin{User: "lim-admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "lim-admin", Key: "password"}}
		},
		"consumers": func(cs *v1.CredentialSet) {
			cs.Spec.Consumers = []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "web"}, {Kind: v1.KindDeployment, Name: "missing"}}
		},
	}
	createSecret(t, ns, "ops-admin", map[string]string{"password": "ops-admin-password-for-tests"})
	ca := mysqlCASecret(t, ns, "mysql-ca")
	for _, name := range []string{"closed", "untrusted", "limited", "consumers"} {
		cs := &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1.CredentialSetSpec{
				MySQL: &v1.MySQLSpec{
					Instances:      v1.MySQLInstances{Hosts: c.Addrs()},
					Admin:          v1.MySQLAdmin{User: "ops-admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "ops-admin", Key: "password"}},
					TLSCASecretRef: ca,
					Users:          []v1.MySQLUser{{Name: "chk-" + name}},
				},
				Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-db"}},
			},
		}
		sets[name](cs)
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a closed port", func(t *testing.T) {
		out, err := rekeyCheck(t, ns, "closed")
		if err == nil || !strings.Contains(err.Error(), "1 check failed") {
			t.Fatalf("check: %v\n%s", err, out)
		}
		row := failedRow(t, out, closed, "reachable")
		mustContain(t, "the row", row, "nothing listens on "+closed+" (connection refused)", "start mysqld there, or correct the address in spec.mysql.instances")
	})

	t.Run("an untrusted certificate", func(t *testing.T) {
		out, err := rekeyCheck(t, ns, "untrusted")
		if err == nil {
			t.Fatalf("check passed:\n%s", out)
		}
		row := failedRow(t, out, p.Addr(), "tls")
		mustContain(t, "the row", row, "is not trusted (signed by an unknown authority)",
			"put the CA certificate that signed it in Secret other-ca key ca.crt (spec.mysql.tlsCASecretRef)")
	})

	t.Run("a missing privilege", func(t *testing.T) {
		out, err := rekeyCheck(t, ns, "limited")
		if err == nil || !strings.Contains(err.Error(), "1 check failed") {
			t.Fatalf("check: %v\n%s", err, out)
		}
		row := failedRow(t, out, p.Addr(), "privileges")
		mustContain(t, "the row", row, "the admin user lim-admin lacks SELECT on mysql.user", "GRANT SELECT ON mysql.user TO 'lim-admin'@'%'")
		// The GRANT it prints is the fix.
		onEachInstance(t, c.Instances(), "GRANT SELECT ON mysql.user TO 'lim-admin'@'%'")
		if out, err := rekeyCheck(t, ns, "limited"); err != nil {
			t.Fatalf("check after the GRANT: %v\n%s", err, out)
		}
	})

	t.Run("a missing consumer refuses a rotation, without retries", func(t *testing.T) {
		waitPhase(t, ns, "consumers", v1.PhaseIdle, 1)
		// kubectl rekey rotate --wait gives up on the refusal at once.
		var rout, errb bytes.Buffer
		args := []string{"--kubeconfig", cp.Kubeconfig, "-n", ns, "rotate", "consumers", "--wait", "--timeout", "2m"}
		if code := plugin.Main(context.Background(), args, plugin.Options{Out: &rout, Err: &errb}); code == 0 {
			t.Fatalf("rotate --wait succeeded on a set that fails its checks:\n%s", rout.String())
		}
		mustContain(t, "rotate --wait's error", errb.String(), "the operator refused (PreflightFailed)", "kubectl rekey check consumers")
		id := getSet(t, ns, "consumers").Annotations[engine.RotateAnnotation]
		msg := waitDegraded(t, ns, "consumers", reason.PreflightFailed)
		mustContain(t, "the condition", msg, "rotation "+id+" did not start: 1 check failed", "Deployment "+ns+"/missing consumer: does not exist",
			"kubectl rekey check consumers lists them all")
		note := waitEvent(t, ns, "consumers", string(reason.PreflightFailed))
		mustContain(t, "the Warning", note, "Deployment "+ns+"/missing", "kubectl rekey check consumers")
		if cs := getSet(t, ns, "consumers"); cs.Status.Phase != v1.PhaseIdle || cs.Status.RotationID != "" {
			t.Fatalf("a refused rotation started: %s", stateOf(cs))
		}
		tried, wrote := attempts(t, ns, "consumers"), writes.count("consumers")
		_, events, _ := eventsAbout(t, ns, "consumers")
		// Each change of a consumer queues the set; the refusal holds.
		for i := range 5 {
			d := &appsv1.Deployment{}
			if err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(web), d); err != nil {
				t.Fatal(err)
			}
			d.Labels = map[string]string{"poke": strconv.Itoa(i)}
			if err := k8s.Update(ctxT(t), d); err != nil && !apierrors.IsConflict(err) {
				t.Fatal(err)
			}
		}
		// A set retried with the backoff (1 s, 2 s, 4 s) measures time
		// for the held one: by its fourth attempt a set retried on any
		// timer would have been tried again too.
		ticker := &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ticker"},
			Spec: v1.CredentialSetSpec{
				MySQL: &v1.MySQLSpec{
					Instances: v1.MySQLInstances{Hosts: []string{freePort(t)}},
					Admin:     v1.MySQLAdmin{User: "ops-admin", PasswordSecretRef: &v1.SecretKeyRef{Name: "ops-admin", Key: "password"}},
					Users:     []v1.MySQLUser{{Name: "ticker"}},
				},
				Distribution: []v1.SecretTarget{{Namespace: ns, Name: "ticker-db"}},
			},
		}
		if err := k8s.Create(ctxT(t), ticker); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "4 attempts of a set retried with the backoff", func() (bool, string) {
			n := attempts(t, ns, "ticker")
			return n >= 4, fmt.Sprintf("%d attempts", n)
		})
		_, eventsHeld, _ := eventsAbout(t, ns, "consumers")
		if d, w, e := attempts(t, ns, "consumers")-tried, writes.count("consumers")-wrote, eventsHeld-events; d != 0 || w != 0 || e != 0 {
			t.Errorf("the refused set was tried %d times, written %d times and got %d Event occurrences while 5 consumer changes and 3 backoff periods passed, want none", d, w, e)
		}

		// kubectl rekey check is a person's change: once it is answered
		// and its attempt made, the set's queue went past every change
		// before it.
		out, err := rekeyCheck(t, ns, "consumers")
		if err == nil {
			t.Fatalf("check passed:\n%s", out)
		}
		row := failedRow(t, out, "Deployment "+ns+"/missing", "consumer")
		mustContain(t, "the row", row, "does not exist", "create Deployment missing in namespace "+ns+", or remove it from spec.consumers")
		mustContain(t, "the output", out, "rotation "+id+" waits for these checks: it starts once they pass")
		// The check's own attempt: the request changed the set, so the
		// refusal was tried again (and stands).
		waitFor(t, time.Minute, "the attempt the check asked for", func() (bool, string) {
			n := attempts(t, ns, "consumers") - tried
			return n >= 1, fmt.Sprintf("%d attempts", n)
		})
		_, eventsNow, reasons := eventsAbout(t, ns, "consumers")
		if d := attempts(t, ns, "consumers") - tried; d != 1 {
			t.Errorf("%d attempts after 5 changes of a consumer and one check, want 1 (the check's)", d)
		}
		if d := writes.count("consumers") - wrote; d > 2 {
			t.Errorf("%d writes of the set after 5 changes of a consumer and one check, want at most 2 (the check request and its answer)", d)
		}
		if d := eventsNow - events; d > 1 {
			t.Errorf("%d more Event occurrences (%v), want at most 1 (the check's attempt)", d, reasons)
		}
		if msg2 := c0(getSet(t, ns, "consumers")).Message; msg2 != msg {
			t.Errorf("the refusal changed between identical attempts:\n%q\n%q", msg, msg2)
		}
		t.Logf("held: %d attempts, %d writes, %d Event occurrences after 5 consumer changes and a check",
			attempts(t, ns, "consumers")-tried, writes.count("consumers")-wrote, eventsNow-events)

		// Fixed, the request that stayed starts with the next check.
		deployment(t, ns, "missing")
		if out, err := rekeyCheck(t, ns, "consumers"); err != nil {
			t.Fatalf("check after the fix: %v\n%s", err, out)
		}
		cs := waitPhase(t, ns, "consumers", v1.PhaseDistributed, 1)
		if cs.Status.RotationID != id {
			t.Fatalf("rotation %q started, want the refused request %s", cs.Status.RotationID, id)
		}
	})
}
