package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/ceph"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/testenv"
)

// rookCSIUsers are Rook's four CSI users with the caps Rook gives them
// (rook pkg/operator/ceph/csi/secrets.go, cephCSIKeyring*Caps), each with
// the Secret Rook distributes it in.
var rookCSIUsers = []struct {
	entity, secret string
	format         v1.SecretFormat
	caps           v1.CephCaps
}{
	{"client.csi-rbd-provisioner", "rook-csi-rbd-provisioner", v1.FormatCephCSI,
		v1.CephCaps{Mon: "profile rbd, allow command 'osd blocklist'", MGR: "allow rw", OSD: "profile rbd"}},
	{"client.csi-rbd-node", "rook-csi-rbd-node", v1.FormatCephCSI,
		v1.CephCaps{Mon: "profile rbd", MGR: "allow rw", OSD: "profile rbd"}},
	// CephFS Secrets also carry adminID/adminKey: ceph-csi before 3.14
	// reads those in the CephFS provisioner and node stage.
	{"client.csi-cephfs-provisioner", "rook-csi-cephfs-provisioner", v1.FormatCephCSIWithAdmin,
		v1.CephCaps{Mon: "allow r, allow command 'osd blocklist'", MGR: "allow rw", OSD: "allow rw tag cephfs metadata=*", MDS: "allow *"}},
	{"client.csi-cephfs-node", "rook-csi-cephfs-node", v1.FormatCephCSIWithAdmin,
		v1.CephCaps{Mon: "allow r", MGR: "allow rw", OSD: "allow rwx tag cephfs metadata=*, allow rw tag cephfs data=*", MDS: "allow rw"}},
}

// TestCephCSIFormat adopts Rook's four CSI users, created before rekey, and
// rotates their keys as Rook rotates CSI keys: policy KeyGeneration, strategy Overlapping,
// keepPriorKeyCount 1, each user distributed to its Rook Secret in
// ceph-csi's format (userID/userKey, plus adminID/adminKey for CephFS).
// Four plugins modelled on ceph-csi read their Secret once and log in with
// the real ceph CLI (--id, --keyfile) continuously, before, during and
// after two rotations; they restart only as nodes are drained, half of
// them first, while the rotation is Distributed. None is ever refused. A
// fifth plugin that never restarts, on Rook's original key, keeps working
// through the first rotation (keepPriorKeyCount 1) and is refused only
// once the second rotation's discard deleted that adopted entity.
func TestCephCSIFormat(t *testing.T) {
	c := testenv.CephForTest(t)
	startManager(t, cp.Config, withCephWorkDir(c))
	ns := newNamespace(t)

	// Rook created its CSI users before rekey (bare names, Rook's caps):
	// rekey adopts them with their keys, so mounts made before it keep
	// working.
	rook := map[string]string{}
	for _, u := range rookCSIUsers {
		args := []string{"auth", "get-or-create", u.entity}
		for _, cap := range [][2]string{{"mon", u.caps.Mon}, {"mgr", u.caps.MGR}, {"osd", u.caps.OSD}, {"mds", u.caps.MDS}} {
			if cap[1] != "" {
				args = append(args, cap[0], cap[1])
			}
		}
		if _, err := c.CLI(ctxT(t), args...); err != nil {
			t.Fatal(err)
		}
		k, err := c.Key(ctxT(t), u.entity)
		if err != nil {
			t.Fatal(err)
		}
		rook[u.entity] = k
	}

	cs := cephSet(t, c, ns, "rook-csi", v1.CephOverlapping)
	cs.Spec.Ceph.KeepPriorKeyCount = ptr.To(int32(1))
	cs.Spec.Rotation = v1.RotationSpec{Policy: v1.PolicyKeyGeneration, KeyGeneration: ptr.To(int64(1))}
	cs.Spec.Distribution = []v1.SecretTarget{{Namespace: ns, Name: "csi-keyrings"}}
	for _, u := range rookCSIUsers {
		cs.Spec.Ceph.Entities = append(cs.Spec.Ceph.Entities, v1.CephEntity{Name: u.entity, Caps: u.caps})
		cs.Spec.Distribution = append(cs.Spec.Distribution, v1.SecretTarget{Namespace: ns, Name: u.secret, Format: u.format, Entity: u.entity})
	}
	if err := k8s.Create(ctxT(t), cs); err != nil {
		t.Fatal(err)
	}
	cs = waitCSIPhase(t, ns, v1.PhaseIdle, 1)
	keys := map[string]string{}
	maps.Copy(keys, assertCSISecrets(t, c, cs, 1))
	if !maps.Equal(keys, rook) {
		t.Fatal("rekey did not adopt the keys of Rook's CSI users as they were")
	}

	var consumers []*csiConsumer
	for _, u := range rookCSIUsers {
		k := &csiConsumer{name: u.secret, ns: ns, secret: u.secret, idField: ceph.CSIUserID, keyField: ceph.CSIUserKey}
		if u.format == v1.FormatCephCSIWithAdmin {
			// An older ceph-csi's CephFS plugin reads the admin pair.
			k.idField, k.keyField = ceph.CSIAdminID, ceph.CSIAdminKey
		}
		k.start(t, c)
		consumers = append(consumers, k)
	}
	stale := &csiConsumer{name: "never-restarted rbd node", ns: ns, secret: "rook-csi-rbd-node", idField: "userID", keyField: "userKey"}
	stale.start(t, c)

	tally := &csiTally{counts: map[string]*[3]int{}}
	tally.setStage("before")
	ctx, stop := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		for ctx.Err() == nil {
			for _, k := range consumers {
				r, msg := k.login(c)
				tally.add(k.name+" as "+k.user(), r, msg)
			}
			// A pause between rounds leaves the (2-core, shared) machine
			// to the manager's own ceph commands.
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	defer func() { stop(); <-loopDone }()
	// rounds waits until every consumer logged in n more times in stage.
	rounds := func(stage string, n int) {
		t.Helper()
		want := tally.ok(stage) + n*len(consumers)
		eventually(t, 3*time.Minute, fmt.Sprintf("%d logins in stage %s", want, stage), func() (bool, string) {
			return tally.ok(stage) >= want, fmt.Sprint(tally.ok(stage))
		})
	}
	rounds("before", 1)

	for gen := int64(2); gen <= 3; gen++ {
		id := fmt.Sprintf("r%d", gen)
		tally.setStage(id + " rotating")
		updateSpec(t, ns, "rook-csi", func(cs *v1.CredentialSet) { cs.Spec.Rotation.KeyGeneration = ptr.To(gen) })
		cs = waitCSIPhase(t, ns, v1.PhaseDistributed, gen-1)
		// Every Secret serves the new generation; the old one still works.
		next := assertCSISecrets(t, c, cs, gen)
		for e, k := range keys {
			if !cephAuthenticates(t, c, e, k) {
				t.Fatalf("%s, generation %d, refused while the rotation is Distributed", e, gen-1)
			}
		}
		tally.setStage(id + " distributed, no node drained")
		rounds(id+" distributed, no node drained", 1)
		// Drain half the nodes: their plugins restart on the new keys.
		tally.setStage(id + " distributed, half drained")
		for _, k := range consumers[:2] {
			k.start(t, c)
		}
		rounds(id+" distributed, half drained", 1)
		tally.setStage(id + " distributed, all drained")
		for _, k := range consumers[2:] {
			k.start(t, c)
		}
		for _, k := range consumers {
			if want := fmt.Sprintf(".%d", gen); !strings.HasSuffix(k.user(), want) {
				t.Fatalf("%s restarted as %s, want generation %d", k.name, k.user(), gen)
			}
		}
		rounds(id+" distributed, all drained", 1)
		tally.setStage(id + " discarding")
		discard(t, ns, "rook-csi", cs.Status.RotationID)
		cs = waitCSIPhase(t, ns, v1.PhaseIdle, gen)
		tally.setStage(id + " after")
		if got := assertCSISecrets(t, c, cs, gen); !maps.Equal(got, next) {
			t.Fatal("the keys distributed changed at discard")
		}
		rounds(id+" after", 1)
		if p := cs.Status.PriorKeyCount; p == nil || *p != 1 {
			t.Fatalf("status.priorKeyCount %v after rotation %d, want 1 (keepPriorKeyCount)", p, gen)
		}
		// keepPriorKeyCount 1: generation gen-1 outlives the discard,
		// gen-2 does not.
		for e, k := range keys {
			if !cephAuthenticates(t, c, e, k) {
				t.Fatalf("%s, generation %d, refused after the discard with keepPriorKeyCount 1", e, gen-1)
			}
		}
		r, msg := stale.login(c)
		switch {
		case gen == 2 && r != csiOK:
			t.Fatalf("a plugin still on generation 1 after the first rotation: %s (keepPriorKeyCount 1 keeps it)", msg)
		case gen == 3 && r != csiRefused:
			t.Fatalf("a plugin still on generation 1 after the second rotation's discard: outcome %d %s, want refused (generation 1 deleted)", r, msg)
		}
		keys = next
	}
	stop()
	<-loopDone

	tally.mu.Lock()
	defer tally.mu.Unlock()
	var total, refused, failed int
	for _, s := range tally.order {
		n := tally.counts[s]
		t.Logf("stage %-34s logins ok %3d, refused %d, failed %d", s, n[csiOK], n[csiRefused], n[csiFailed])
		total += n[csiOK]
		refused += n[csiRefused]
		failed += n[csiFailed]
	}
	observed(t, "ceph-csi-format plugins: %d logins with the real ceph CLI over 2 rotations, %d refused, %d failed", total, refused, failed)
	if refused+failed > 0 {
		t.Fatalf("%d logins refused, %d failed: %v", refused, failed, tally.fails)
	}
	want := slices.Collect(maps.Values(keys))
	secrets := map[string]string{}
	for i, k := range want {
		secrets[fmt.Sprint("key", i)] = k
	}
	assertNoSecretLeaked(t, ns, "rook-csi", secrets)
}

// waitCSIPhase is waitPhase with room for a loaded machine: each step of
// a rotation of four entities runs a dozen ceph commands.
func waitCSIPhase(t testing.TB, ns string, phase v1.RotationPhase, gen int64) *v1.CredentialSet {
	t.Helper()
	var cs *v1.CredentialSet
	eventually(t, 6*time.Minute, fmt.Sprintf("rook-csi phase %s generation %d", phase, gen), func() (bool, string) {
		cs = getSet(t, ns, "rook-csi")
		return cs.Status.Phase == phase && cs.Status.KeyGeneration == gen, stateOf(cs)
	})
	return cs
}

// assertCSISecrets checks what each Rook CSI Secret holds at generation
// gen: exactly userID (the generation's entity without "client.": Rook's
// bare name at generation 1, adopted) and
// userKey (its bare key, as the mon has it), plus the same pair as
// adminID/adminKey for CephFS; the Native target holds the same keys. It
// returns each generation entity's key.
func assertCSISecrets(t testing.TB, c *testenv.Ceph, cs *v1.CredentialSet, gen int64) map[string]string {
	t.Helper()
	native := secretData(t, cs.Namespace, "csi-keyrings")
	out := map[string]string{}
	for _, u := range rookCSIUsers {
		s := &corev1.Secret{}
		if err := k8s.Get(ctxT(t), client.ObjectKey{Namespace: cs.Namespace, Name: u.secret}, s); err != nil {
			t.Fatal(err)
		}
		want := []string{"userID", "userKey"}
		if u.format == v1.FormatCephCSIWithAdmin {
			want = []string{"adminID", "adminKey", "userID", "userKey"}
		}
		if got := slices.Sorted(maps.Keys(s.Data)); !slices.Equal(got, want) {
			t.Fatalf("Secret %s holds keys %v, want %v", u.secret, got, want)
		}
		id, key := string(s.Data["userID"]), string(s.Data["userKey"])
		entity := u.entity // generation 1: Rook's user, adopted
		if gen > 1 {
			entity = fmt.Sprintf("%s.%d", u.entity, gen)
		}
		if id != strings.TrimPrefix(entity, "client.") {
			t.Fatalf("Secret %s: userID %q, want %q (the entity without client.)", u.secret, id, strings.TrimPrefix(entity, "client."))
		}
		onMon, err := c.Key(ctxT(t), entity)
		if err != nil {
			t.Fatal(err)
		}
		if key != onMon {
			t.Fatalf("Secret %s: userKey is not %s's key on the mon", u.secret, entity)
		}
		if b, err := base64.StdEncoding.DecodeString(key); err != nil || len(b) == 0 {
			t.Fatalf("Secret %s: userKey is not a bare base64 key", u.secret)
		}
		if u.format == v1.FormatCephCSIWithAdmin && (string(s.Data["adminID"]) != id || string(s.Data["adminKey"]) != key) {
			t.Fatalf("Secret %s: adminID/adminKey differ from userID/userKey", u.secret)
		}
		if g := s.Annotations[naming.GenerationAnnotation]; g != fmt.Sprint(gen) {
			t.Fatalf("Secret %s: annotation %s %q, want %d", u.secret, naming.GenerationAnnotation, g, gen)
		}
		if string(native[u.entity+".key"]) != key || string(native[u.entity+".id"]) != id {
			t.Fatalf("the Native target does not hold %s's generation %d", u.entity, gen)
		}
		out[entity] = key
	}
	return out
}

// TestAdmissionCephCSIFormat: the API server refuses a ceph-csi format
// that cannot be written (a non-Ceph set, a set of several entities with
// no entity named, an entity not in the set, an entity without a CephCSI
// format, a non-client entity), naming the field.
func TestAdmissionCephCSIFormat(t *testing.T) {
	ns := newNamespace(t)
	set := func() *v1.CredentialSet {
		return &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "csi-"},
			Spec: v1.CredentialSetSpec{Ceph: &v1.CephSpec{
				Monitors: []string{"v2:10.0.0.1:3300"},
				Admin:    v1.CephAdmin{KeyringSecretRef: v1.SecretKeyRef{Name: "ceph-admin", Key: "keyring"}},
				Strategy: v1.CephOverlapping,
				Entities: []v1.CephEntity{
					{Name: "client.csi-rbd-node", Caps: v1.CephCaps{Mon: "profile rbd"}},
					{Name: "client.csi-rbd-provisioner", Caps: v1.CephCaps{Mon: "profile rbd"}},
				},
			}, Distribution: []v1.SecretTarget{
				{Namespace: ns, Name: "rook-csi-rbd-node", Format: v1.FormatCephCSI, Entity: "client.csi-rbd-node"},
				{Namespace: ns, Name: "rook-csi-rbd-provisioner", Format: v1.FormatCephCSIWithAdmin, Entity: "client.csi-rbd-provisioner"},
				{Namespace: ns, Name: "keyrings"},
			}},
		}
	}
	cases := []struct {
		name   string
		mutate func(*v1.CredentialSet)
		want   []string
	}{
		{"several entities, none named", func(cs *v1.CredentialSet) { cs.Spec.Distribution[1].Entity = "" },
			[]string{"spec.distribution", "format CephCSI or CephCSIWithAdmin holds the userID and userKey of one entity", "spec.ceph.entities has several", "name the one it serves in the target's entity"}},
		{"entity not in the set", func(cs *v1.CredentialSet) { cs.Spec.Distribution[0].Entity = "client.csi-cephfs-node" },
			[]string{"spec.distribution", "names an entity that is not in spec.ceph.entities"}},
		{"entity without format", func(cs *v1.CredentialSet) { cs.Spec.Distribution[2].Entity = "client.csi-rbd-node" },
			[]string{"spec.distribution[2].entity", "set format CephCSI"}},
		{"entity with format Native", func(cs *v1.CredentialSet) {
			cs.Spec.Distribution[2].Entity, cs.Spec.Distribution[2].Format = "client.csi-rbd-node", v1.FormatNative
		}, []string{"spec.distribution[2].entity", "set format CephCSI"}},
		{"unknown format", func(cs *v1.CredentialSet) { cs.Spec.Distribution[0].Format = "Keyring" },
			[]string{"spec.distribution[0].format", "Unsupported value", `"CephCSI"`}},
		{"non-client entity", func(cs *v1.CredentialSet) { cs.Spec.Distribution[0].Entity = "mgr.a" },
			[]string{"spec.distribution[0].entity", "should match"}},
		{"the only entity is no client", func(cs *v1.CredentialSet) {
			cs.Spec.Ceph.Strategy = v1.CephInPlace
			cs.Spec.Ceph.Entities = []v1.CephEntity{{Name: "mgr.a", Caps: v1.CephCaps{Mon: "allow profile mgr"}}}
			cs.Spec.Distribution = []v1.SecretTarget{{Namespace: ns, Name: "mgr", Format: v1.FormatCephCSI}}
		}, []string{"spec.distribution", "serves a client entity", "rotate a client.* entity"}},
		{"a RabbitMQ set", func(cs *v1.CredentialSet) {
			cs.Spec.Ceph = nil
			cs.Spec.RabbitMQ = &v1.RabbitMQSpec{Endpoint: "https://rabbit.example:15671",
				Admin: v1.RabbitMQAdmin{SecretRef: v1.LocalSecretRef{Name: "admin"}}, User: v1.RabbitMQUser{Base: "app"}}
			cs.Spec.Distribution = []v1.SecretTarget{{Namespace: ns, Name: "app", Format: v1.FormatCephCSI}}
		}, []string{"spec.distribution", "for spec.ceph sets only", "remove format"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := set()
			tc.mutate(cs)
			err := k8s.Create(ctxT(t), cs)
			if err == nil {
				t.Fatalf("admitted: %+v", cs.Spec.Distribution)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("rejected with %q, want a message containing %q", err, w)
				}
			}
		})
	}
	if err := k8s.Create(ctxT(t), set()); err != nil {
		t.Fatalf("a well-formed set of CephCSI targets rejected: %v", err)
	}
	one := set()
	one.Spec.Ceph.Entities = one.Spec.Ceph.Entities[:1]
	one.Spec.Distribution = []v1.SecretTarget{{Namespace: ns, Name: "rook-csi-rbd-node", Format: v1.FormatCephCSI}}
	if err := k8s.Create(ctxT(t), one); err != nil {
		t.Fatalf("a CephCSI target of a one-entity set, entity left out, rejected: %v", err)
	}
}
