package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/backend/cephkube"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/testenv"
)

// cephAdminEntity is the identity rekey runs as in these tests. It is not
// client.admin, which the test harness keeps for itself: when rekey rotates
// its own admin key, the harness can still look at the cluster.
const cephAdminEntity = "client.rekey-admin"

// cephAdmin creates rekey's admin entity (allow * everywhere) and a Secret
// holding its keyring, and returns the Secret's name.
func cephAdmin(t testing.TB, c *testenv.Ceph, ns, name string) string {
	t.Helper()
	out, err := c.CLI(ctxT(t), "auth", "get-or-create", cephAdminEntity, "mon", "allow *", "osd", "allow *", "mds", "allow *", "mgr", "allow *")
	if err != nil {
		t.Fatal(err)
	}
	kr, err := ceph.ParseKeyring(string(out))
	if err != nil {
		t.Fatal(err)
	}
	secret := name + "-ceph-admin"
	createSecret(t, ns, secret, map[string]string{"keyring": kr.String()})
	return secret
}

// cephSet is a Ceph set of entities, rekey acting as cephAdminEntity.
func cephSet(t testing.TB, c *testenv.Ceph, ns, name string, strategy v1.CephStrategy, entities ...v1.CephEntity) *v1.CredentialSet {
	t.Helper()
	return &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.CredentialSetSpec{
			Ceph: &v1.CephSpec{
				Monitors: []string{c.MonAddr},
				Admin: v1.CephAdmin{Entity: cephAdminEntity,
					KeyringSecretRef: v1.SecretKeyRef{Name: cephAdmin(t, c, ns, name), Key: "keyring"}},
				Strategy: strategy,
				Entities: entities,
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-keys"}},
		},
	}
}

// withCephWorkDir points an in-process manager at the test environment's
// ceph CLI (as --ceph-cli would) and its ceph files at the chroot, where
// that CLI can read them.
func withCephWorkDir(c *testenv.Ceph) func(*controller.Reconciler) {
	return func(r *controller.Reconciler) {
		r.Settings.Set(cephkube.FlagWorkDir, c.Dir.Host)
		r.Settings.Set(cephkube.FlagCLI, c.CLIPath)
	}
}

// keyOf is the key of entity held in keyring text.
func keyOf(t testing.TB, keyring []byte) (entity, key string) {
	t.Helper()
	kr, err := ceph.ParseKeyring(string(keyring))
	if err != nil {
		t.Fatalf("not a keyring: %v", err)
	}
	return kr.Entity, kr.Key
}

// cephAuthenticates reports whether the mon accepts key for entity.
func cephAuthenticates(t testing.TB, c *testenv.Ceph, entity, key string) bool {
	t.Helper()
	ok, err := c.Authenticates(context.Background(), entity, key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// cephEntities lists the cluster's entities whose names start with prefix.
func cephEntities(t testing.TB, c *testenv.Ceph, prefix string) []string {
	t.Helper()
	out, err := c.CLI(ctxT(t), "auth", "ls")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, prefix) && !strings.HasPrefix(line, "\t") && !strings.Contains(line, " ") {
			names = append(names, strings.TrimSpace(line))
		}
	}
	return names
}

// versionWrapper is a ceph CLI that answers `ceph version` with the version
// in a file the test controls, and passes everything else to the real CLI:
// a real mon cannot change version on demand, so the policy's input is
// injected exactly at the boundary where rekey reads it.
func versionWrapper(t testing.TB, c *testenv.Ceph, version string) (cli string, setVersion func(string)) {
	t.Helper()
	vfile := filepath.Join(c.Dir.Host, "fake-version")
	set := func(v string) {
		if err := os.WriteFile(vfile, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set(version)
	cli = filepath.Join(c.Dir.Host, "ceph-versioned")
	script := fmt.Sprintf(`#!/bin/sh
for a; do
	if [ "$a" = version ]; then
		printf '{"version":"ceph version %%s (0000000000) tentacle (stable)"}\n' "$(cat %q)"
		exit 0
	fi
done
exec %q "$@"
`, vfile, c.CLIPath)
	if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return cli, set
}
