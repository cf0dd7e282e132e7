package controller

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func mysqlHosts(ns string, hosts ...string) *v1.CredentialSet {
	return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"},
		Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{Instances: v1.MySQLInstances{Hosts: hosts}}}}
}

func mysqlSts(ns, name string) *v1.CredentialSet {
	return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"},
		Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{Instances: v1.MySQLInstances{
			StatefulSet: &v1.StatefulSetInstances{Name: name}}}}}
}

func cephMons(mons ...string) *v1.CredentialSet {
	return &v1.CredentialSet{Spec: v1.CredentialSetSpec{Ceph: &v1.CephSpec{Monitors: mons}}}
}

func rabbit(endpoint string) *v1.CredentialSet {
	return &v1.CredentialSet{Spec: v1.CredentialSetSpec{RabbitMQ: &v1.RabbitMQSpec{Endpoint: endpoint}}}
}

// TestBackendLockKeys: sets that reach a common server share a key (and so
// are never reconciled at once); sets on different servers share none.
func TestBackendLockKeys(t *testing.T) {
	for _, tc := range []struct {
		name  string
		a, b  *v1.CredentialSet
		share bool
	}{
		{"same MySQL host", mysqlHosts("x", "db:3306"), mysqlHosts("y", "db:3306"), true},
		{"one MySQL instance of three in common", mysqlHosts("x", "a:3306", "b:3306", "c:3306"), mysqlHosts("x", "c:3306", "d:3306"), true},
		{"MySQL host case", mysqlHosts("x", "DB.example:3306"), mysqlHosts("x", "db.example:3306"), true},
		{"MySQL same host, other port", mysqlHosts("x", "127.0.0.1:3306"), mysqlHosts("x", "127.0.0.1:3307"), false},
		{"MySQL other hosts", mysqlHosts("x", "a:3306"), mysqlHosts("x", "b:3306"), false},
		{"same StatefulSet", mysqlSts("x", "db"), mysqlSts("x", "db"), true},
		{"StatefulSet of the same name in another namespace", mysqlSts("x", "db"), mysqlSts("y", "db"), false},
		{"a host naming a pod of the StatefulSet", mysqlSts("x", "db"), mysqlHosts("y", "db-2.db-headless.x.svc:3306"), true},
		{"a pod host with the cluster domain", mysqlSts("x", "db"), mysqlHosts("x", "db-0.db.x.svc.cluster.local:3306"), true},
		{"a pod host of another StatefulSet", mysqlSts("x", "db"), mysqlHosts("x", "db2-0.db.x.svc:3306"), false},
		{"same mon", cephMons("10.0.0.1:6789"), cephMons("10.0.0.1:6789"), true},
		{"one mon in common", cephMons("10.0.0.1", "10.0.0.2", "10.0.0.3"), cephMons("10.0.0.3", "10.0.0.4"), true},
		{"a mon by its v2 and its v1 address", cephMons("v2:10.0.0.1:3300"), cephMons("v1:10.0.0.1:6789"), true},
		{"a mon with and without port", cephMons("mon-a.rook"), cephMons("v2:mon-a.rook:3300"), true},
		{"IPv6 mon", cephMons("[fd00::1]"), cephMons("v2:[fd00::1]:3300"), true},
		{"mons on one host, other ports", cephMons("127.0.0.1:40001"), cephMons("127.0.0.1:40002"), false},
		{"other mons", cephMons("10.0.0.1"), cephMons("10.0.0.2"), false},
		{"same broker", rabbit("https://rmq.x.svc:15671"), rabbit("https://rmq.x.svc:15671/"), true},
		{"broker: the scheme's default port", rabbit("https://rmq.x.svc"), rabbit("https://RMQ.x.svc:443/api"), true},
		{"broker: other port", rabbit("http://127.0.0.1:15672"), rabbit("http://127.0.0.1:15673"), false},
		{"other brokers", rabbit("http://a:15672"), rabbit("http://b:15672"), false},
		{"MySQL and a broker on one host", mysqlHosts("x", "h:3306"), rabbit("http://h:3306"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ka, kb := BackendLockKeys(tc.a), BackendLockKeys(tc.b)
			if len(ka) == 0 || len(kb) == 0 {
				t.Fatalf("no keys: %v, %v", ka, kb)
			}
			if !slices.IsSorted(ka) || !slices.IsSorted(kb) {
				t.Errorf("keys not sorted: %v, %v", ka, kb)
			}
			shared := slices.ContainsFunc(ka, func(k string) bool { return slices.Contains(kb, k) })
			if shared != tc.share {
				t.Errorf("share a key = %v, want %v (%v, %v)", shared, tc.share, ka, kb)
			}
		})
	}
	if k := BackendLockKeys(&v1.CredentialSet{}); k != nil {
		t.Errorf("no backend: keys %v, want none", k)
	}
	if k := BackendLockKeys(mysqlHosts("x", "a:1", "b:1", "a:1")); !slices.Equal(k, []string{"mysql:a:1", "mysql:b:1"}) {
		t.Errorf("duplicates: %v", k)
	}
}

type lockClock struct{ t time.Time }

func (c *lockClock) now() time.Time { return c.t }

func newTestLocks() (*backendLocks, workqueue.TypedRateLimitingInterface[reconcile.Request], *lockClock) {
	l := newBackendLocks()
	c := &lockClock{t: time.Unix(1e9, 0)}
	l.now = c.now
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	l.setQueue(q, nil)
	return l, q, c
}

func set(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

// queued drains the queue: the sets woken, in order.
func queued(q workqueue.TypedRateLimitingInterface[reconcile.Request]) []string {
	var out []string
	for q.Len() > 0 {
		r, _ := q.Get()
		out = append(out, r.Name)
		q.Done(r)
	}
	return out
}

// TestBackendLocks: a set takes all of its keys or none; a set that found
// a key busy is woken, alone, when it is released.
func TestBackendLocks(t *testing.T) {
	l, q, clock := newTestLocks()
	if _, ok := l.tryLock(set("a"), []string{"k1", "k2"}); !ok {
		t.Fatal("a: free keys refused")
	}
	// b needs k2 (busy) and k3 (free): it takes neither.
	if busy, ok := l.tryLock(set("b"), []string{"k2", "k3"}); ok || busy != "k2" {
		t.Fatalf("b: got ok=%v busy=%q, want to wait on k2", ok, busy)
	}
	if _, ok := l.tryLock(set("c"), []string{"k3"}); !ok {
		t.Fatal("c: k3 was held by a set that waits")
	}
	if _, ok := l.tryLock(set("d"), []string{"k1"}); ok {
		t.Fatal("d: k1 is a's")
	}
	if _, ok := l.tryLock(set("e"), []string{"k2"}); ok {
		t.Fatal("e: k2 is a's")
	}
	if got := queued(q); len(got) != 0 {
		t.Fatalf("woken before any release: %v", got)
	}
	l.unlock(set("a"), []string{"k1", "k2"})
	// One waiter per released key, first come first woken.
	if got := queued(q); !slices.Equal(got, []string{"d", "b"}) {
		t.Fatalf("woken %v, want [d b]", got)
	}
	// b is back: k3 is c's, so it waits there, and k2 (free) goes to e.
	if busy, ok := l.tryLock(set("b"), []string{"k2", "k3"}); ok || busy != "k3" {
		t.Fatalf("b: got ok=%v busy=%q, want to wait on k3", ok, busy)
	}
	if got := queued(q); !slices.Equal(got, []string{"e"}) {
		t.Fatalf("woken %v, want [e]", got)
	}
	// e is deleted meanwhile: its wake-up passes on to nobody (none waits
	// on k2), and d takes k1.
	l.forget(set("e"))
	if _, ok := l.tryLock(set("d"), []string{"k1"}); !ok {
		t.Fatal("d: woken for a free k1, refused")
	}
	l.unlock(set("c"), []string{"k3"})
	if got := queued(q); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("woken %v, want [b]", got)
	}
	// While b is on its way, k3 is kept for it: f, which did not wait,
	// waits now.
	if _, ok := l.tryLock(set("f"), []string{"k3"}); ok {
		t.Fatal("f: k3 is kept for the woken b")
	}
	if _, ok := l.tryLock(set("b"), []string{"k2", "k3"}); !ok {
		t.Fatal("b: woken for k3, refused")
	}
	if _, ok := l.tryLock(set("g"), []string{"k3"}); ok {
		t.Fatal("g: k3 is b's")
	}
	l.unlock(set("b"), []string{"k2", "k3"})
	if got := queued(q); !slices.Equal(got, []string{"f"}) {
		t.Fatalf("woken %v, want [f]", got)
	}
	// A woken set that never comes back holds the key only for
	// lockWakeExpiry.
	l.unlock(set("d"), []string{"k1"})
	if _, ok := l.tryLock(set("h"), []string{"k3"}); ok {
		t.Fatal("h: k3 is kept for the woken f")
	}
	if got := queued(q); len(got) != 0 {
		t.Fatalf("woken %v while f is on its way", got)
	}
	clock.t = clock.t.Add(lockWakeExpiry)
	if _, ok := l.tryLock(set("h"), []string{"k3"}); !ok {
		t.Fatal("h: f never came back, and k3 is free")
	}
	l.unlock(set("h"), []string{"k3"})
	if got := queued(q); !slices.Equal(got, []string{"g"}) {
		t.Fatalf("woken %v, want [g]", got)
	}
	// f comes back late: k3 is kept for g now.
	if _, ok := l.tryLock(set("f"), []string{"k3"}); ok {
		t.Fatal("f: k3 is kept for g")
	}
	if _, ok := l.tryLock(set("g"), []string{"k3"}); !ok {
		t.Fatal("g: woken for k3, refused")
	}
}

// TestBackendLocksMovedSet: a set woken for a key its spec no longer names
// passes the wake-up on.
func TestBackendLocksMovedSet(t *testing.T) {
	l, q, _ := newTestLocks()
	l.tryLock(set("a"), []string{"k1"})
	l.tryLock(set("b"), []string{"k1"})
	l.tryLock(set("c"), []string{"k1"})
	l.unlock(set("a"), []string{"k1"})
	if got := queued(q); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("woken %v, want [b]", got)
	}
	if _, ok := l.tryLock(set("b"), []string{"k9"}); !ok {
		t.Fatal("b: k9 is free")
	}
	if got := queued(q); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("woken %v, want [c]", got)
	}
}

// TestBackendLockPassesOverHeld: a release never wakes a set its backoff
// still holds (it comes back by itself when the backoff ends); the next
// waiter is woken instead, so sets failing on one server do not wake each
// other past their backoff.
func TestBackendLockPassesOverHeld(t *testing.T) {
	l, q, _ := newTestLocks()
	heldSets := map[string]bool{"b": true}
	l.backoff = func(s types.NamespacedName) time.Duration {
		if heldSets[s.Name] {
			return time.Minute
		}
		return 0
	}
	if _, ok := l.tryLock(set("a"), []string{"k"}); !ok {
		t.Fatal("a: free key refused")
	}
	for _, s := range []string{"b", "c"} {
		if _, ok := l.tryLock(set(s), []string{"k"}); ok {
			t.Fatalf("%s: k is a's", s)
		}
	}
	l.unlock(set("a"), []string{"k"})
	if got := queued(q); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("woken %v, want [c]: b is held by its backoff", got)
	}
	if slices.Contains(l.waiting["k"], set("b")) {
		t.Errorf("b still waits in line: %v", l.waiting["k"])
	}
}
