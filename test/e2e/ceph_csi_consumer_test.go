package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"rekey.io/rekey/internal/testenv"
)

// csiConsumer plays a ceph-csi plugin: when it starts it reads the id and
// key fields of its Secret once, writes the key to a key file, and from
// then on connects with the real ceph CLI as --id <id> --keyfile=<file>
// (the arguments ceph-csi gives rbd map, and its rados connections'),
// until it is restarted: a new mount, after a node drain.
type csiConsumer struct {
	name, ns, secret  string
	idField, keyField string

	mu      sync.Mutex
	id      string
	keyfile string
}

// start (re)reads the Secret, as a restarted plugin would.
func (k *csiConsumer) start(t testing.TB, c *testenv.Ceph) {
	t.Helper()
	data := secretData(t, k.ns, k.secret)
	id, key := string(data[k.idField]), string(data[k.keyField])
	if id == "" || key == "" {
		t.Fatalf("%s: Secret %s has no %s/%s", k.name, k.secret, k.idField, k.keyField)
	}
	f, err := os.CreateTemp(c.Dir.Host, "csi-keyfile-*")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(key)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	// The previous key file stays until the test ends: a login that
	// started before the restart may still be reading it.
	t.Cleanup(func() { os.Remove(f.Name()) })
	k.mu.Lock()
	k.id, k.keyfile = id, f.Name()
	k.mu.Unlock()
}

func (k *csiConsumer) user() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.id
}

// csiLogin is the outcome of one connection.
type csiLogin int

const (
	csiOK csiLogin = iota
	csiRefused
	csiFailed
)

// login connects as the consumer and runs a read-only mon command its caps
// allow; it tells success, a refused key, and anything else apart.
func (k *csiConsumer) login(c *testenv.Ceph) (csiLogin, string) {
	k.mu.Lock()
	id, keyfile := k.id, k.keyfile
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.CLIPath, "-m", c.MonAddr, "--id", id, "--keyfile="+keyfile, "osd", "pool", "ls")
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/bin"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return csiOK, ""
	}
	msg := strings.TrimSpace(stderr.String())
	var ee *exec.ExitError
	if ok := asExit(err, &ee); ok && ee.ExitCode() == 13 && strings.Contains(msg, "error connecting to the cluster") {
		return csiRefused, msg
	}
	return csiFailed, fmt.Sprintf("%v: %s", err, msg)
}

func asExit(err error, ee **exec.ExitError) bool {
	x, ok := err.(*exec.ExitError)
	*ee = x
	return ok
}

// csiTally counts logins per stage of the rotation.
type csiTally struct {
	mu     sync.Mutex
	stage  string
	order  []string
	counts map[string]*[3]int
	fails  []string
}

func (y *csiTally) setStage(s string) {
	y.mu.Lock()
	defer y.mu.Unlock()
	y.stage = s
	if y.counts[s] == nil {
		y.counts[s] = &[3]int{}
		y.order = append(y.order, s)
	}
}

func (y *csiTally) add(who string, r csiLogin, msg string) {
	y.mu.Lock()
	defer y.mu.Unlock()
	y.counts[y.stage][r]++
	if r != csiOK {
		y.fails = append(y.fails, fmt.Sprintf("%s in %s: %s", who, y.stage, msg))
	}
}

func (y *csiTally) ok(stage string) int {
	y.mu.Lock()
	defer y.mu.Unlock()
	if c := y.counts[stage]; c != nil {
		return c[csiOK]
	}
	return 0
}
