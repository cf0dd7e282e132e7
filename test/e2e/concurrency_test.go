package e2e

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// blackHole is a TCP listener that accepts connections and never answers
// (a MySQL client waits for a greeting that never comes). It records how
// many connections were open at once.
type blackHole struct {
	ln            net.Listener
	mu            sync.Mutex
	open, maxOpen int
	total         int
	wg            sync.WaitGroup
	conns         []net.Conn
	stopped       bool
}

func startBlackHole(t testing.TB) *blackHole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &blackHole{ln: ln}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.open++
			h.total++
			h.maxOpen = max(h.maxOpen, h.open)
			h.conns = append(h.conns, c)
			h.mu.Unlock()
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				// Read until the client gives up and closes; never write.
				buf := make([]byte, 512)
				for {
					if _, err := c.Read(buf); err != nil {
						break
					}
				}
				h.mu.Lock()
				h.open--
				h.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		h.mu.Lock()
		for _, c := range h.conns {
			c.Close()
		}
		h.mu.Unlock()
		h.wg.Wait()
	})
	return h
}

func (h *blackHole) addr() string { return h.ln.Addr().String() }

func (h *blackHole) counts() (total, maxOpen int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total, h.maxOpen
}

// TestBlackHoleBackendDoesNotStallOthers: more sets than the
// manager has workers point at a MySQL host that accepts connections and
// never answers. They share that backend, so the keyed lock lets one of
// them at a time try it (each login gives up after its deadline, the set
// reports InstanceUnreachable and is retried), and a set on a healthy
// instance provisions, rotates and discards meanwhile: its new password
// works and the old one is refused, while every black-hole set is still
// unprovisioned.
func TestBlackHoleBackendDoesNotStallOthers(t *testing.T) {
	c := testenv.MySQLClusterForTest(t, testenv.MySQLOptions{NoReplicas: true})
	hole := startBlackHole(t)
	ns := newNamespace(t)
	startManager(t, cp.Config) // the default workers
	healthy := appUserSet(t, ns, "orders", c)
	stuck := controller.DefaultMaxConcurrentReconciles + 1
	for i := range stuck {
		s := healthy.DeepCopy()
		s.Name = fmt.Sprintf("stuck-%d", i)
		s.Spec.MySQL.Instances.Hosts = []string{hole.addr()}
		s.Spec.MySQL.Users = []v1.MySQLUser{{Name: s.Name}}
		s.Spec.Distribution = []v1.SecretTarget{{Namespace: ns, Name: s.Name + "-db"}}
		if err := k8s.Create(ctxT(t), s); err != nil {
			t.Fatal(err)
		}
	}
	// Whichever black-hole set tries first reports it.
	note := ""
	waitFor(t, time.Minute, "InstanceUnreachable on a black-hole set", func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(ctxT(t), &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if strings.HasPrefix(e.Regarding.Name, "stuck-") && e.Reason == string(reason.InstanceUnreachable) {
				note = e.Note
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
	mustContain(t, "InstanceUnreachable of a black-hole set", note, "no answer to the login within")
	if err := k8s.Create(ctxT(t), healthy); err != nil {
		t.Fatal(err)
	}
	cs := waitPhase(t, ns, "orders", v1.PhaseIdle, 1)
	keys := map[string]string{"ORDERS_PASSWORD": "orders"}
	gen1 := userPasswords(sourceData(t, cs), keys, "")
	rotate(t, ns, "orders", "orders-1")
	waitFor(t, 2*time.Minute, "orders Distributed", func() (bool, string) {
		cs = getSet(t, ns, "orders")
		return cs.Status.Phase == v1.PhaseDistributed && cs.Status.RotateApplied, stateOf(cs)
	})
	discard(t, ns, "orders", "orders-1")
	cs = waitPhase(t, ns, "orders", v1.PhaseIdle, 2)
	gen2 := userPasswords(sourceData(t, cs), keys, "")
	if got := userPasswords(secretData(t, ns, "orders-db"), keys, ""); !equalMaps(got, gen2) {
		t.Fatal("orders-db does not hold the new password")
	}
	loginMatrix(t, "after the healthy set's rotation", c.Instances(), gen2, gen1)
	var states []string
	for i := range stuck {
		s := getSet(t, ns, fmt.Sprintf("stuck-%d", i))
		if s.Status.KeyGeneration != 0 {
			t.Fatalf("%s provisioned on a black hole: %s", s.Name, stateOf(s))
		}
		states = append(states, s.Name+": "+condSummary(s))
	}
	total, maxOpen := hole.counts()
	observed(t, "while the healthy set rotated, %d sets stayed unprovisioned on the black hole (%s); it took %d connections, at most %d open at once",
		stuck, strings.Join(states, "; "), total, maxOpen)
	if total == 0 {
		t.Fatal("no set ever tried the black hole")
	}
	// The black-hole sets share one backend key: one at a time tries it.
	// (2: a connection the client closed may be seen closed a moment
	// after the next set's connection is accepted.)
	if maxOpen > 2 {
		t.Fatalf("%d connections to the black hole open at once: the sets sharing it were not serialised", maxOpen)
	}
}
