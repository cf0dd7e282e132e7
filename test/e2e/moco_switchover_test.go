package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/mysqlkube"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestMOCOSwitchoverMidRotation rotates MOCO's system users with MOCO's
// clustering loop acting on the cluster's real mysqld (played by
// moco-harness with MOCO's own DecideState, password and dbop code; see
// docs/moco.md for what is played): every restart of a pod restarts its
// mysqld with replication stopped, and MOCO's loop re-points the replica
// with STOP REPLICA / CHANGE REPLICATION SOURCE TO … SOURCE_USER =
// 'moco-repl', SOURCE_PASSWORD = <from the user Secret> / START REPLICA.
// While the rotation is Distributed, the primary is switched over as
// `kubectl moco switchover` asks MOCO to (and again whenever MOCO's
// rollout restarts the primary's pod). The rotation completes through
// MOCO's paced rollout; every replica replicates after every restart,
// with the rotated 32-character password; no consumer login is refused;
// the old passwords are refused after the discard; MOCO's password code
// reads every Secret alike in every phase.
func TestMOCOSwitchoverMidRotation(t *testing.T) {
	began := time.Now()
	c := matrixCluster(t, testenv.MySQLOptions{})
	installMOCOCRDs(t)
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: []string{env.MOCOPlayedCRDs()}, ErrorIfPathMissing: true,
		MaxTime: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mocoSystemNS}}); err != nil {
		t.Fatal(err)
	}
	harness, err := env.StartMOCOHarness(cp, mocoSystemNS)
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	t.Cleanup(func() {
		if t.Failed() {
			if d := condition(getSet(t, ns, "moco"), reason.CondDegraded); d != nil {
				t.Logf("the set's Degraded condition: %s: %s", d.Reason, d.Message)
			}
		}
	})
	mc := mocoCluster(t, ns, "shop", testenv.HoldReadyAnnotation)
	var gen1 map[string]string
	eventually(t, 2*time.Minute, "MOCO's reconciler made the Secrets", func() (bool, string) {
		s := &corev1.Secret{}
		if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "moco-shop"}, s); err != nil {
			return false, err.Error()
		}
		gen1 = userPasswords(s.Data, mocoKeys, "")
		return len(gen1) == 8, fmt.Sprintf("%d passwords", len(gen1))
	})
	// moco-agent's initialisation, played: the 8 users with MOCO's
	// passwords (moco-repl with the grants moco-agent gives it), on
	// instances that do not replicate yet: MOCO's loop points them.
	var stmts []string
	for _, u := range mocoKeys {
		stmts = append(stmts, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", u, gen1[u]))
	}
	onEachInstance(t, c.Instances(), append(stmts, "GRANT ALL PRIVILEGES ON *.* TO 'moco-admin'@'%' WITH GRANT OPTION",
		"GRANT REPLICATION CLIENT, REPLICATION SLAVE ON *.* TO 'moco-repl'@'%'")...)
	for _, r := range c.Replicas {
		if err := r.Exec("STOP REPLICA", "RESET REPLICA ALL"); err != nil {
			t.Fatal(err)
		}
	}
	pods := playMOCOMySQLPods(t, ns, "shop", c.Instances())
	var addrs []string
	for _, i := range c.Instances() {
		addrs = append(addrs, i.Addr())
	}
	setMOCOAnnotation(t, mc, "moco-harness.rekey.io/addresses", strings.Join(addrs, ","))
	waitMOCOHealthy(t, ns, "shop", true)
	assertMOCOReplicating(t, c.Instances(), 0, gen1["moco-repl"])

	dns := map[string]string{}
	for n, i := range c.Instances() {
		dns[fmt.Sprintf("moco-shop-%d.moco-shop.%s.svc:3306", n, ns)] = i.Addr()
	}
	startManager(t, cp.Config, func(r *controller.Reconciler) {
		r.AddressMap = func(a string) string { return dns[a] }
		r.Settings.Set(mysqlkube.FlagMOCONamespace, mocoSystemNS)
	})
	agents := startPodConsumers(t, k8s, cp, ns, "moco-shop", mocoKeys, c.Instances)
	registerConsumers(t, agents)
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moco"},
		Spec: v1.CredentialSetSpec{
			MySQL: &v1.MySQLSpec{MOCO: &v1.MOCOSpec{ClusterName: "shop"},
				TLSCASecretRef: mysqlCASecret(t, ns, "shop-ca"), TLSServerName: testenv.MySQLTLSName},
			Consumers: []v1.ConsumerRef{{Kind: v1.KindStatefulSet, Name: "moco-shop"}},
		},
	}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "moco", v1.PhaseIdle, 1)
	checkMOCOSecrets(t, ns, "shop", gen1, "Idle at generation 1")
	w := watchPacing(t, ns, "moco", "moco-shop", "shop")
	restartsBefore := len(pods.snapshot())

	rotate(t, ns, "moco", "rot-1")
	cs = waitPhase(t, ns, "moco", v1.PhaseDistributed, 1)
	pend := userPasswords(sourceData(t, cs), mocoKeys, engine.PendingSuffix)
	if n := len(pend["moco-repl"]); n != 32 {
		t.Fatalf("moco-repl's rotated password has %d characters; MySQL takes at most 32 as a replication password", n)
	}
	checkMOCOSecrets(t, ns, "shop", pend, "Distributed")

	// kubectl moco switchover: the demote annotation on the primary's pod.
	old := mocoPrimaryIndex(t, ns, "shop")
	switchAt := time.Now()
	demote := `{"metadata":{"annotations":{"moco.cybozu.com/demote":"true"}}}`
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("moco-shop-%d", old)}}
	if err := k8s.Patch(ctxT(t), pod, client.RawPatch("application/merge-patch+json", []byte(demote))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "MOCO's loop switched the primary over", func() (bool, string) {
		n := mocoPrimaryIndex(t, ns, "shop")
		return n != old, fmt.Sprintf("primary %d", n)
	})
	switchTook := time.Since(switchAt)
	if ph := getSet(t, ns, "moco").Status.Phase; ph != v1.PhaseDistributed {
		t.Fatalf("the switchover was to happen mid-rotation; the set is %s", ph)
	}
	t.Logf("switchover from instance %d to %d (while Distributed) took %s", old, mocoPrimaryIndex(t, ns, "shop"), switchTook.Round(100*time.Millisecond))

	discard(t, ns, "moco", "rot-1")
	// The discard waits for MOCO's paced rollout after the switchover: at
	// load ~50 its last pod moved 8 s before a 5-minute guard ran out.
	waitPhaseWithin(t, 20*time.Minute, ns, "moco", v1.PhaseIdle, 2)
	paced := w.snapshot()
	if len(paced.stuck) > 0 {
		t.Fatalf("RolloutStuck reported during MOCO's rollout: %q", paced.stuck)
	}
	assertMOCOPaced(t, paced)
	restarts := pods.assertReplicasRepointed(t, restartsBefore, pend["moco-repl"])
	if len(restarts) < 3 {
		t.Fatalf("%d pod restarts in MOCO's rollout; want 3", len(restarts))
	}
	primary := mocoPrimaryIndex(t, ns, "shop")
	assertMOCOReplicating(t, c.Instances(), primary, pend["moco-repl"])
	if v, err := c.Instances()[primary].QueryString("SELECT @@GLOBAL.read_only"); err != nil || v != "0" {
		t.Fatalf("MOCO's primary (instance %d) is read_only=%q (%v)", primary, v, err)
	}
	checkMOCOSecrets(t, ns, "shop", pend, "Idle at generation 2")
	loginMatrix(t, "Idle after the switchover and the paced rollout", c.Instances(), pend, gen1)
	assertNoSecretLeaked(t, ns, "moco", gen1, pend)
	repoints, switchovers := harnessCounts(t, harness.LogPath)
	t.Logf("MOCO's loop: %d re-points (CHANGE REPLICATION SOURCE), %d switchovers; %d mysqld restarts in the rollout; test took %s",
		repoints, switchovers, len(restarts), time.Since(began).Round(time.Second))
}

func setMOCOAnnotation(t testing.TB, mc *unstructured.Unstructured, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if err := k8s.Patch(ctxT(t), mc.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// checkMOCOSecrets reads the cluster's controller, user and my.cnf
// Secrets with MOCO's own password code (moco-harness check-secrets:
// password.NewMySQLPasswordFromSecret, ToSecret, ToMyCnfSecret) until
// every reader gets want (user → password): MOCO's reconciler copies the
// controller Secret rekey writes into the two others.
func checkMOCOSecrets(t testing.TB, ns, cluster string, want map[string]string, phase string) {
	t.Helper()
	bin, _, err := env.MOCOHarness()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, phase+": MOCO's password code reads the same 8 passwords from the controller, user and my.cnf Secrets", func() (bool, string) {
		out, err := exec.Command(bin, "check-secrets", "--kubeconfig="+cp.Kubeconfig, "--namespace="+ns, "--cluster="+cluster,
			"--system-namespace="+mocoSystemNS).Output()
		if err != nil {
			return false, fmt.Sprintf("moco-harness check-secrets: %v", err)
		}
		var got struct {
			Readers              map[string]map[string]string
			Errors               map[string]string
			UserIsToSecret       bool
			MyCnfIsToMyCnfSecret bool
		}
		if err := json.Unmarshal(out, &got); err != nil {
			return false, err.Error()
		}
		if len(got.Errors) > 0 {
			return false, fmt.Sprintf("MOCO's password code refused a Secret: %v", got.Errors)
		}
		for _, reader := range []string{"controller", "user"} {
			for u, pw := range want {
				sum := sha256.Sum256([]byte(pw))
				if got.Readers[reader][u] != hex.EncodeToString(sum[:])[:12] {
					return false, fmt.Sprintf("NewMySQLPasswordFromSecret reads another password for %s from the %s Secret", u, reader)
				}
			}
		}
		return got.UserIsToSecret && got.MyCnfIsToMyCnfSecret, fmt.Sprintf(
			"ToSecret of the controller Secret's passwords is the user Secret: %v; ToMyCnfSecret is the my.cnf Secret: %v", got.UserIsToSecret, got.MyCnfIsToMyCnfSecret)
	})
}

// harnessCounts counts, in moco-harness's log, the replicas MOCO's loop
// pointed at a source and the switchovers it finished.
func harnessCounts(t testing.TB, path string) (repoints, switchovers int) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("moco-harness log: %v", err)
		return 0, 0
	}
	repoints = len(regexp.MustCompile(`(?m)\tstart replication\t`).FindAll(b, -1))
	switchovers = len(regexp.MustCompile(`(?m)\tswitchover finished\t`).FindAll(b, -1))
	return repoints, switchovers
}
