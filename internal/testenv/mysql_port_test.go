package testenv

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMySQLStartWhenPortTaken: a socket that takes an instance's port
// before mysqld binds it (another server, an outgoing connection's local
// port) makes a first start move to another port, and a restart wait for
// its own port; either way the instance ends up serving logins. The
// listener standing in for the thief accepts and never answers, as a
// foreign server would a MySQL client.
func TestMySQLStartWhenPortTaken(t *testing.T) {
	e := Require(t)
	i, err := e.newMySQLInstance("port-taken", RolePrimary)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(i.Destroy)
	taken := i.Port
	thief := listen(t, taken)
	if err := i.Start(); err != nil {
		t.Fatalf("first start with port %d taken: %v", taken, err)
	}
	if i.Port == taken {
		t.Fatalf("the instance still has the taken port %d", taken)
	}
	if err := i.CanLogin(EnvUser, EnvPassword); err != nil {
		t.Fatalf("login on %s after the move: %v", i.Addr(), err)
	}
	if !logSince(i.errorLogPath(), 0, "Address already in use") {
		t.Fatal("mysqld's error log does not show the bind failure: the taken port was never tried")
	}
	thief.Close()

	t.Run("a restart keeps its port and waits for it", func(t *testing.T) {
		i.Stop()
		port := i.Port
		st, err := os.Stat(i.errorLogPath())
		if err != nil {
			t.Fatal(err)
		}
		thief := listen(t, port)
		done := make(chan error, 1)
		go func() { done <- i.Start() }()
		// Released once mysqld has failed on it: the wait is then proven.
		for !logSince(i.errorLogPath(), st.Size(), "Address already in use") {
			select {
			case err := <-done:
				t.Fatalf("Start returned %v while its port was taken", err)
			case <-time.After(100 * time.Millisecond):
			}
		}
		thief.Close()
		if err := <-done; err != nil {
			t.Fatalf("restart: %v", err)
		}
		if i.Port != port {
			t.Fatalf("the restart moved the instance from port %d to %d", port, i.Port)
		}
		if err := i.CanLogin(EnvUser, EnvPassword); err != nil {
			t.Fatalf("login on %s after the restart: %v", i.Addr(), err)
		}
	})
}

// listen holds a loopback listener on the port until closed or the test
// ends; it accepts connections and never writes.
func listen(t *testing.T, port int) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn // kept open: a client sees a server that does not speak
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				if !strings.Contains(err.Error(), "closed") {
					t.Logf("thief on %d: %v", port, err)
				}
				return
			}
			held = append(held, c)
		}
	}()
	return l
}
