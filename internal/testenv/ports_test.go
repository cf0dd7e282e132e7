package testenv

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"
)

// TestFreePortsOutsideEphemeralRange: the ports harness servers get are
// ones no outgoing connection can be given meanwhile, each handed out once,
// and free when handed out.
func TestFreePortsOutsideEphemeralRange(t *testing.T) {
	low, high := ephemeralRange()
	if _, _, ok := portPool(low, high); !ok {
		t.Fatalf("the ephemeral range %d-%d leaves no pool: this test proves nothing here", low, high)
	}
	ports, err := FreePorts(40)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, p)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if low <= p && p <= high {
			t.Errorf("port %d is in the ephemeral range %d-%d", p, low, high)
		}
		if seen[p] {
			t.Errorf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		l.Close()
	}
}

// TestPortAllocatorsShareNothing: two allocators on one lock file, as two
// test processes are, never hand out the same port, even from the same
// start; and neither hands out a port something listens on.
func TestPortAllocatorsShareNothing(t *testing.T) {
	lo, hi, ok := portPool(ephemeralRange())
	if !ok {
		t.Fatal("no pool outside the ephemeral range")
	}
	// A small pool: the two meet at once without the lock.
	lo = hi - 39
	lock := filepath.Join(t.TempDir(), "ports.lock")
	a, b := newPortAllocator(lo, hi, lock, 7), newPortAllocator(lo, hi, lock, 7)
	if a.lock == nil || b.lock == nil {
		t.Fatal("the lock file did not open")
	}
	defer a.lock.Close()
	defer b.lock.Close()
	// Something listens on the port both would pick first.
	busy, err := net.Listen("tcp", ":"+strconv.Itoa(lo+a.start))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	owner := map[int]string{}
	for range 15 {
		for name, al := range map[string]*portAllocator{"a": a, "b": b} {
			p, err := al.take()
			if err != nil {
				t.Fatal(err)
			}
			if p < lo || p > hi {
				t.Fatalf("%s: port %d outside its pool %d-%d", name, p, lo, hi)
			}
			if p == lo+a.start {
				t.Fatalf("%s: port %d, on which something listens", name, p)
			}
			if o, dup := owner[p]; dup {
				t.Fatalf("port %d handed out to %s and %s", p, o, name)
			}
			owner[p] = name
		}
	}
}

func TestPortPool(t *testing.T) {
	for _, c := range []struct {
		low, high, lo, hi int
		ok                bool
	}{
		{32768, 60999, 20000, 32767, true}, // Linux's default
		{49152, 65535, 20000, 49151, true}, // IANA's
		{15000, 60999, 61000, 65535, true}, // low: above instead
		{2000, 65000, 0, 0, false},         // no room anywhere
		{1024, 65535, 0, 0, false},
		{20500, 65000, 1024, 20499, true}, // only below the floor
	} {
		lo, hi, ok := portPool(c.low, c.high)
		if lo != c.lo || hi != c.hi || ok != c.ok {
			t.Errorf("portPool(%d, %d) = %d, %d, %v; want %d, %d, %v", c.low, c.high, lo, hi, ok, c.lo, c.hi, c.ok)
		}
	}
}
