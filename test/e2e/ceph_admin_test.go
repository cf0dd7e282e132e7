package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// adminCaps are the caps cephAdmin gives rekey's admin: listed in the set so
// that the spec describes the entity it rotates truthfully.
var adminCaps = v1.CephCaps{Mon: "allow *", OSD: "allow *", MDS: "allow *", MGR: "allow *"}

// TestCephAdminRotationCrash rotates the key rekey itself runs every Ceph
// command with, through a temporary rotator entity. The real manager
// binary is SIGKILLed after each of the procedure's steps 1 to 9 and after
// each of the engine's writes that follow (the read-back keys into the
// source Secret, then status: the procedure's step 10). At every
// kill some keyring stored in the API server still administers the real
// mon; a fresh manager then finishes the rotation with no rotator left
// behind, the admin keyring Secret, the source Secret and the mon agreeing,
// and the admin's previous key refused.
func TestCephAdminRotationCrash(t *testing.T) {
	c := testenv.CephForTest(t)
	ns := newNamespace(t)
	const name = "self"
	// A second entity after the admin: it is rotated in the same pass, so
	// it proves the session carries on with the admin's new key.
	entities := []string{cephAdminEntity, "client.rekey-daemon"}
	cs := cephSet(t, c, ns, name, v1.CephInPlace,
		v1.CephEntity{Name: cephAdminEntity, Caps: adminCaps},
		v1.CephEntity{Name: entities[1], Caps: v1.CephCaps{Mon: "allow r"}})
	cs.Spec.Rotation = v1.RotationSpec{DiscardPolicy: v1.DiscardAfterRollout, GracePeriod: &metav1.Duration{Duration: time.Second}}
	// AfterRollout retires only once a declared consumer moved: the daemon
	// is redeployed and reported by automation outside Kubernetes.
	cs.Spec.ConsumerGroups = []v1.ConsumerGroup{ackerGroup("node-1")}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	deleteAtEnd(t, cs)
	ackEveryDistribution(t, ns, name, "node-1")
	adminSecret := cs.Spec.Ceph.Admin.KeyringSecretRef.Name

	var keys map[string]string // the entities' current keys, checked
	ok := t.Run("in-process", func(t *testing.T) {
		// Stopped when the subtest ends: the killed processes below must
		// be the only manager working on the set.
		startManager(t, cp.Config, withCephWorkDir(c))
		before := assertCephSecrets(t, c, waitPhase(t, ns, name, v1.PhaseIdle, 1), entities...)
		if _, key := keyOf(t, secretData(t, ns, adminSecret)["keyring"]); key != before[cephAdminEntity] {
			t.Fatal("after provisioning the source Secret and the admin keyring Secret hold different admin keys")
		}
		rotate(t, ns, name, "in-process")
		waitPhase(t, ns, name, v1.PhaseIdle, 2)
		waitEvent(t, ns, name, string(reason.AdminKeyRotated))
		keys = assertAdminRotated(t, c, ns, name, adminSecret, before)
		// It went through the rotator: its Secret was written, then emptied.
		rotator := client.ObjectKey{Namespace: ns, Name: ceph.RotatorSecretName(adminSecret)}
		if err := k8s.Get(ctxT(t), rotator, &corev1.Secret{}); err != nil {
			t.Fatalf("the rotator's Secret was never written: %v", err)
		}
	})
	if !ok {
		return
	}

	// --ceph-work-dir: the test CLI runs in the chroot and must see the
	// keyring files the manager writes.
	flags := []string{"--ceph-work-dir", c.Dir.Host, "--ceph-cli", c.CLIPath}
	type crashPoint struct {
		fp string
		// adminDead: killed between ROTATE (step 4) and the admin Secret's
		// update (step 7), the stored admin key no longer works and the
		// rotator's keyring alone can finish: the kills that really
		// exercise the procedure's recovery. Anywhere else the stored admin
		// key works.
		adminDead bool
		// recovers: a rotator is left (in the mon, the store or both) that
		// the next process must deal with before anything else.
		recovers bool
	}
	var points []crashPoint
	for step := 1; step <= 9; step++ {
		points = append(points, crashPoint{fmt.Sprintf("ceph-admin/step-%d", step), step >= 4 && step <= 6, step <= 8})
	}
	// Step 10 is the engine's: a crash after the read-back keys were stored
	// in the source Secret, and after the status write that follows.
	points = append(points, crashPoint{fp: "rotate/pending-stored"}, crashPoint{fp: "rotate/rotate-applied"})
	gen := int64(2)
	for i, p := range points {
		mp := startManagerProcessWith(t, p.fp, flags...)
		rotate(t, ns, name, fmt.Sprintf("crash-%d", i+1))
		mp.waitKilled(t, p.fp)
		killedAt := time.Now()
		which := storedKeyringAdministers(t, c, ns, adminSecret)
		if rescued := which == ceph.RotatorEntity; rescued != p.adminDead {
			t.Fatalf("killed at %s, the stored admin key works=%v: the procedure has it dead exactly between ROTATE and the Secret update", p.fp, !rescued)
		}

		m := startManagerProcessWith(t, "", flags...)
		gen++
		waitPhase(t, ns, name, v1.PhaseIdle, gen)
		if p.recovers {
			waitEventSince(t, ns, name, string(reason.AdminRotationRecovered), killedAt)
		}
		m.stop()
		keys = assertAdminRotated(t, c, ns, name, adminSecret, keys)
		t.Logf("killed at %s (%s's keyring administered the mon), completed at generation %d", p.fp, which, gen)
	}
}

// storedKeyringAdministers checks, right after a kill, that a keyring
// stored in the API server (the admin Secret's, or the rotator Secret's)
// still runs admin commands on the mon, and returns whose it is.
func storedKeyringAdministers(t testing.TB, c *testenv.Ceph, ns, adminSecret string) string {
	t.Helper()
	entity, key := keyOf(t, secretData(t, ns, adminSecret)["keyring"])
	if entity != cephAdminEntity {
		t.Fatalf("the admin keyring Secret holds a keyring for %s, not %s", entity, cephAdminEntity)
	}
	if administers(t, c, entity, key) {
		return entity
	}
	if kr := rotatorKeyring(t, ns, adminSecret); len(kr) > 0 {
		entity, key := keyOf(t, kr)
		if entity == ceph.RotatorEntity && administers(t, c, entity, key) {
			return entity
		}
	}
	t.Fatalf("no stored keyring administers the cluster: neither the admin Secret %s nor %s", adminSecret, ceph.RotatorSecretName(adminSecret))
	return ""
}

// administers: the key authenticates and its caps let it list the auth
// database, the first thing the admin procedure does with a keyring.
func administers(t testing.TB, c *testenv.Ceph, entity, key string) bool {
	t.Helper()
	_, err := c.CLIAs(context.Background(), entity, key, "auth", "ls")
	return err == nil
}

// rotatorKeyring is what the rotator Secret holds, nil when it does not
// exist or was emptied.
func rotatorKeyring(t testing.TB, ns, adminSecret string) []byte {
	t.Helper()
	s := &corev1.Secret{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: ceph.RotatorSecretName(adminSecret)}, s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return s.Data["keyring"]
}

// assertAdminRotated checks a completed rotation of a set holding the
// admin entity: for every entity the mon, the source Secret and the
// distribution Secret hold one new key, which authenticates, while the old
// one is refused; the admin keyring Secret holds the admin's new key, which
// administers the cluster; nothing of the rotator is left in the mon or in
// the API server. It returns the new keys. One auth dump answers for every
// key the mon holds: each ceph command costs the better part of a second.
func assertAdminRotated(t testing.TB, c *testenv.Ceph, ns, name, adminSecret string, before map[string]string) map[string]string {
	t.Helper()
	cs := getSet(t, ns, name)
	mon := monKeys(t, c)
	if _, ok := mon[ceph.RotatorEntity]; ok {
		t.Fatalf("%s still in ceph auth ls after the rotation", ceph.RotatorEntity)
	}
	src, dist := sourceData(t, cs), secretData(t, ns, cs.Spec.Distribution[0].Name)
	now := map[string]string{}
	for e, old := range before {
		entity, key := keyOf(t, src[e])
		switch {
		case entity != e || key != mon[e]:
			t.Fatalf("the source Secret's key for %s is not the mon's", e)
		case string(dist[e+".key"]) != key:
			t.Fatalf("the distribution Secret does not serve %s's current key", e)
		case key == old:
			t.Fatalf("%s kept its key through the rotation", e)
		case cephAuthenticates(t, c, e, old):
			t.Fatalf("the mon still accepts %s's previous key", e)
		case e != cephAdminEntity && !cephAuthenticates(t, c, e, key):
			t.Fatalf("%s's new key does not authenticate", e)
		}
		now[e] = key
	}
	entity, key := keyOf(t, secretData(t, ns, adminSecret)["keyring"])
	if entity != cephAdminEntity || key != now[cephAdminEntity] {
		t.Fatalf("the admin keyring Secret holds %s with a key that is not the mon's key of %s", entity, cephAdminEntity)
	}
	if !administers(t, c, entity, key) {
		t.Fatal("the admin keyring Secret's key does not administer the cluster")
	}
	if kr := rotatorKeyring(t, ns, adminSecret); len(kr) > 0 {
		t.Fatalf("Secret %s still holds a keyring after the rotation", ceph.RotatorSecretName(adminSecret))
	}
	return now
}

// monKeys is every entity's key as the mon holds it (ceph auth ls).
func monKeys(t testing.TB, c *testenv.Ceph) map[string]string {
	t.Helper()
	out, err := c.CLI(ctxT(t), "auth", "ls", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var dump struct {
		AuthDump []struct {
			Entity string `json:"entity"`
			Key    string `json:"key"`
		} `json:"auth_dump"`
	}
	if err := json.Unmarshal(out, &dump); err != nil {
		t.Fatalf("ceph auth ls: unreadable output: %v", err)
	}
	keys := map[string]string{}
	for _, e := range dump.AuthDump {
		keys[e.Entity] = e.Key
	}
	return keys
}

// assertKeysReplaced: each entity of old has a new key, served by every
// Secret as the mon holds it, and the mon refuses the old key. It returns
// the new keys.
func assertKeysReplaced(t testing.TB, c *testenv.Ceph, cs *v1.CredentialSet, old map[string]string) map[string]string {
	t.Helper()
	var entities []string
	for e := range old {
		entities = append(entities, e)
	}
	now := assertCephSecrets(t, c, cs, entities...)
	for e, k := range old {
		if now[e] == k {
			t.Fatalf("%s kept its key through the rotation", e)
		}
		if cephAuthenticates(t, c, e, k) {
			t.Fatalf("the mon still accepts %s's previous key", e)
		}
	}
	return now
}

// waitEventSince waits for an Event about the set with reason why that was
// emitted after since. Events of one reason repeated by one process are
// folded into the first one's series, so this tells apart only what
// distinct processes (or sets) emitted — the case of a restarted manager.
func waitEventSince(t testing.TB, ns, name, why string, since time.Time) string {
	t.Helper()
	note := ""
	eventually(t, time.Minute, fmt.Sprintf("event %s on %s after %s", why, name, since.Format(time.TimeOnly)), func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Name != name || e.Reason != why {
				continue
			}
			at := e.EventTime.Time
			if e.Series != nil && e.Series.LastObservedTime.After(at) {
				at = e.Series.LastObservedTime.Time
			}
			if at.After(since) {
				note = e.Note
				return true, ""
			}
			seen = append(seen, at.Format(time.StampMicro))
		}
		return false, "earlier ones: " + strings.Join(seen, ", ")
	})
	return note
}

// deleteAtEnd deletes the set when the test ends, while its mon still
// runs: a set left behind would send every later manager to a dead mon.
func deleteAtEnd(t testing.TB, cs *v1.CredentialSet) {
	t.Cleanup(func() {
		if err := k8s.Delete(context.Background(), cs); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s/%s: %v", cs.Namespace, cs.Name, err)
		}
	})
}
