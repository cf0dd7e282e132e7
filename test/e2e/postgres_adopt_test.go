package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// TestPostgresAdoption: a set adopts the login role applications use
// today, given its password: generation 1 is that role, unchanged; the
// first rotation moves to <base>_g2 and its discard drops the adopted role.
// A wrong password and a missing group are refused with what to fix, and
// fixing them is all it takes.
func TestPostgresAdoption(t *testing.T) {
	p := testenv.PostgresForTest(t)
	// The group is missing at first: the set is refused, and goes on once
	// it exists.
	if err := p.Exec(p.Primary, "CREATE ROLE shop LOGIN PASSWORD 'ShopPassword0123456789'"); err != nil {
		t.Fatal(err)
	}
	startManager(t, cp.Config)
	ns := newNamespace(t)
	createSecret(t, ns, "pg-admin", map[string]string{"username": p.AdminUser, "password": p.AdminPassword})
	createSecret(t, ns, "pg-ca", map[string]string{"ca.crt": string(p.CAPEM)})
	createSecret(t, ns, "shop-legacy", map[string]string{"password": "not-the-password-0123"})
	cs := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: v1.CredentialSetSpec{
			Postgres: &v1.PostgresSpec{
				Hosts:          []string{p.Primary.Addr(), p.Replica.Addr()},
				Admin:          v1.PostgresAdmin{SecretRef: v1.LocalSecretRef{Name: "pg-admin"}},
				TLSCASecretRef: &v1.SecretKeyRef{Name: "pg-ca", Key: "ca.crt"},
				Login:          v1.PostgresLogin{Base: "shop", Group: "shop_owner"},
				Adopt:          &v1.PostgresAdopt{Role: "shop", PasswordSecretRef: v1.SecretKeyRef{Name: "shop-legacy", Key: "password"}},
			},
			Distribution: []v1.SecretTarget{{Namespace: ns, Name: "shop-db"}},
			Rotation:     v1.RotationSpec{DiscardPolicy: v1.DiscardManual},
		},
	}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	// A wrong password adopts nothing, and says what to fix.
	note := waitEvent(t, ns, "shop", string(reason.ProvisionFailed))
	mustContain(t, "ProvisionFailed event", note, "does not log in as role shop")
	legacy := &corev1.Secret{}
	if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "shop-legacy"}, legacy); err != nil {
		t.Fatal(err)
	}
	legacy.Data = map[string][]byte{"password": []byte("ShopPassword0123456789")}
	if err := k8s.Update(ctxT(t), legacy); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the missing group refused, naming the statement that creates it", func() (bool, string) {
		c := condition(getSet(t, ns, "shop"), reason.CondDegraded)
		return c != nil && strings.Contains(c.Message, "CREATE ROLE \"shop_owner\" NOLOGIN"), fmt.Sprint(c)
	})
	if err := p.Exec(p.Primary, "CREATE ROLE shop_owner NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "shop", v1.PhaseIdle, 1)
	if d := secretData(t, ns, "shop-db"); string(d["username"]) != "shop" || string(d["password"]) != "ShopPassword0123456789" {
		t.Fatalf("generation 1 distributes %q, want the adopted role with its password", d["username"])
	}
	rotate(t, ns, "shop", "r1")
	waitPhase(t, ns, "shop", v1.PhaseDistributed, 1)
	g2 := secretData(t, ns, "shop-db")
	if string(g2["username"]) != "shop_g2" {
		t.Fatalf("after the rotation the Secret names %q, want shop_g2", g2["username"])
	}
	discard(t, ns, "shop", "r1")
	waitPhase(t, ns, "shop", v1.PhaseIdle, 2)
	if roles := pgRoles(t, p, "shop"); strings.Join(roles, ",") != "shop_g2,shop_owner" {
		t.Fatalf("after the discard the roles are %v, want shop_g2 and shop_owner", roles)
	}
	for _, i := range []*testenv.PostgresInstance{p.Primary, p.Replica} {
		if err := p.CanLogin(i, "shop_g2", string(g2["password"])); err != nil {
			t.Fatalf("shop_g2 on the %s: %v", i.Name, err)
		}
	}
	assertNoSecretLeaked(t, ns, "shop", map[string]string{"admin": p.AdminPassword, "adopted": "ShopPassword0123456789", "g2": string(g2["password"])})
}
