package ceph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
	"rekey.io/rekey/internal/testenv"
)

// fileStore is a KeyringStore in files, as durable as the Secrets the
// controller uses: a crashed process leaves exactly what it wrote. The
// admin file can be the cluster's own admin keyring, so that the test
// environment's CLI follows a rotated admin key.
type fileStore struct {
	admin, rotator string
}

func (f fileStore) LoadAdmin(context.Context) (string, error) {
	b, err := os.ReadFile(f.admin)
	return string(b), err
}

func (f fileStore) SaveAdmin(_ context.Context, keyring string) error {
	return writeDurable(f.admin, keyring)
}

func (f fileStore) LoadRotator(context.Context) (string, bool, error) {
	b, err := os.ReadFile(f.rotator)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	return string(b), err == nil, err
}

func (f fileStore) SaveRotator(_ context.Context, keyring string) error {
	return writeDurable(f.rotator, keyring)
}

func (f fileStore) DeleteRotator(context.Context) error {
	err := os.Remove(f.rotator)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func writeDurable(path, content string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// fixture is a backend on a real mon plus what tests check it with.
type fixture struct {
	c       *testenv.Ceph
	b       *Backend
	store   fileStore
	reports []string
	mu      sync.Mutex
}

var workSeq struct {
	sync.Mutex
	n int
}

// newFixture builds a backend for the spec (monitors and admin filled in)
// running the test environment's CLI, whose work folder lives where the
// chroot's CLI can see it.
func newFixture(t *testing.T, c *testenv.Ceph, spec v1.CephSpec) *fixture {
	t.Helper()
	return newFixtureCLI(t, c, spec, c.CLIPath)
}

// newFixtureCLI is newFixture with another ceph CLI, as a manager started
// with --ceph-cli would run.
func newFixtureCLI(t *testing.T, c *testenv.Ceph, spec v1.CephSpec, cli string) *fixture {
	t.Helper()
	if spec.Monitors == nil {
		spec.Monitors = []string{c.MonAddr}
	}
	workSeq.Lock()
	workSeq.n++
	dir := filepath.Join(c.Dir.Host, "work", strings.ReplaceAll(t.Name(), "/", "_")+"-"+strconv.Itoa(workSeq.n))
	workSeq.Unlock()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f := &fixture{c: c, store: fileStore{admin: c.AdminKeyring.Host, rotator: filepath.Join(dir, "rotator.keyring")}}
	b, err := New(&spec, f.store, cli)
	if err != nil {
		t.Fatal(err)
	}
	b.WorkDir = dir
	b.Owner = testOwner(t)
	b.ConnectTimeout = 5 * time.Second
	b.Report = func(r reason.Reason, msg string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.reports = append(f.reports, string(r)+": "+msg)
	}
	f.b = b
	t.Cleanup(func() {
		// Every operation removes its files: nothing may stay on disk.
		if left, _ := filepath.Glob(filepath.Join(dir, "rekey-ceph-*")); len(left) > 0 {
			t.Errorf("work folders left behind: %v", left)
		}
	})
	return f
}

// testOwner is a set identity per top-level test: tests share the mon and
// each owns the entities it creates; subtests (the steps of one scenario)
// act for the same set.
func testOwner(t *testing.T) Owner {
	top, _, _ := strings.Cut(t.Name(), "/")
	h := hex.EncodeToString(func() []byte { s := sha256.Sum256([]byte(top)); return s[:16] }())
	// Shaped like a Kubernetes UID (a UUID), as in production.
	uid := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	return Owner{UID: uid, Set: "test/set-" + h[:6]}
}

// ctxFor bounds a test's ceph commands. It only guards against a hang: a
// scenario runs a few dozen commands, each a CLI start in the chroot, which
// on a shared two-core machine under load took up to several seconds
// (2 minutes ran out in the middle of passing tests, then 5 minutes for
// TestOwnershipOnTheRealMon's subtests, which share one context, at load 46).
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// keyringIn reads a secret value as a keyring, failing without printing it.
func keyringIn(t *testing.T, s engine.Secrets, name string) Keyring {
	t.Helper()
	kr, err := ParseKeyring(s[name])
	if err != nil {
		t.Fatalf("secret %s: %v", name, err)
	}
	return kr
}

// authOK tells whether kr opens a session with the real mon.
func (f *fixture) authOK(t *testing.T, kr Keyring) bool {
	t.Helper()
	_, err := f.c.CLIAs(ctxFor(t), kr.Entity, kr.Key, "fsid")
	if err != nil && !errors.Is(err, testenv.ErrCephAuth) {
		t.Fatalf("login as %s: %v", kr.Entity, err)
	}
	return err == nil
}

func (f *fixture) mustAuth(t *testing.T, kr Keyring, want bool) {
	t.Helper()
	if got := f.authOK(t, kr); got != want {
		t.Fatalf("%s: authenticates=%v, want %v", kr.Entity, got, want)
	}
}

// entities lists the auth database as the test environment's admin sees it.
func (f *fixture) entities(t *testing.T) map[string]authEntry {
	t.Helper()
	out, err := f.c.CLI(ctxFor(t), "auth", "ls", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := decodeDump(out)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// generationsOf lists base's generation entities in the cluster.
func (f *fixture) generationsOf(t *testing.T, base string) []int64 {
	t.Helper()
	return authDump(f.entities(t)).generations(base)
}

// create makes an entity directly, as an earlier tool or a crashed rotation
// would have, and returns its keyring.
func (f *fixture) create(t *testing.T, entity string, caps ...string) Keyring {
	t.Helper()
	args := append([]string{"auth", "get-or-create", entity}, caps...)
	out, err := f.c.CLI(ctxFor(t), append(args, "--format", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	e, err := decodeEntry(out, entity, "auth get-or-create")
	if err != nil {
		t.Fatal(err)
	}
	return e.keyring()
}

// createOwned is create for an entity rekey made for f's set (an earlier
// rotation, or one a crash interrupted): recorded first, as rekey does.
func (f *fixture) createOwned(t *testing.T, entity string, caps ...string) Keyring {
	t.Helper()
	if _, err := f.c.CLI(ctxFor(t), "config-key", "set", ownerPrefix+entity, f.b.Owner.value()); err != nil {
		t.Fatal(err)
	}
	return f.create(t, entity, caps...)
}

// recordOf is entity's ownership record on the mon, "" when none.
func (f *fixture) recordOf(t *testing.T, entity string) string {
	t.Helper()
	out, err := f.c.CLI(ctxFor(t), "config-key", "get", ownerPrefix+entity)
	if err != nil {
		if strings.Contains(err.Error(), "ENOENT") || strings.Contains(err.Error(), "exit status 2") {
			return ""
		}
		t.Fatal(err)
	}
	return string(out)
}

func (f *fixture) reported(r reason.Reason) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.reports {
		if strings.HasPrefix(m, string(r)+": ") {
			out = append(out, m)
		}
	}
	return out
}

// noKeys fails when text holds anything shaped like a cephx key, or one of
// the cluster's keys: errors, refusals and reports must never carry one.
func (f *fixture) noKeys(t *testing.T, what, text string) {
	t.Helper()
	if keyShaped.MatchString(text) {
		t.Fatalf("%s holds something shaped like a key", what)
	}
	for _, e := range f.entities(t) {
		if strings.Contains(text, e.Key) {
			t.Fatalf("%s holds %s's key", what, e.Entity)
		}
	}
}

// noKeysInReports checks every report so far.
func (f *fixture) noKeysInReports(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	all := strings.Join(f.reports, "\n")
	f.mu.Unlock()
	f.noKeys(t, "a report", all)
}

// wantRefusal checks err is a refusal for r that names entity and holds no
// key, and returns its message.
func (f *fixture) wantRefusal(t *testing.T, err error, r reason.Reason, entity string) string {
	t.Helper()
	ref, ok := engine.AsRefusal(err)
	if !ok || ref.Reason != string(r) {
		t.Fatalf("got %v, want a %s refusal", err, r)
	}
	if !strings.Contains(ref.Message, entity) {
		t.Fatalf("refusal %q does not name %s", ref.Message, entity)
	}
	f.noKeys(t, "the refusal", err.Error())
	return ref.Message
}

var (
	sharedOnce sync.Once
	shared     *testenv.Ceph
	sharedErr  error
)

// sharedCeph is one mon for the tests that do not touch the admin key;
// each uses its own entity names. TestMain stops it.
func sharedCeph(t *testing.T) *testenv.Ceph {
	t.Helper()
	sharedOnce.Do(func() {
		e := testenv.Require(t)
		shared, sharedErr = e.StartCeph()
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}
