package ceph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/failpoint"
	"rekey.io/rekey/internal/testenv"
)

// childEnv carries what TestAdminRotationChild needs; without it the child
// test has nothing to do.
const childEnv = "REKEY_CEPH_ADMIN_CHILD"

type childParams struct {
	CLI, Mon, WorkDir, Admin, Rotator string
	Owner                             Owner
}

// The admin rotation is killed for real (SIGKILL from the failpoint, no
// deferred code runs) after each of its steps 1 to 9. After every kill
// some stored keyring still administers the cluster, and RecoverAdmin run
// by a fresh backend leaves a working stored admin key, no rotator in the
// cluster and none in the store.
func TestAdminRotationCrash(t *testing.T) {
	t.Parallel()
	c := testenv.CephForTest(t)
	for step := 1; step <= 9; step++ {
		t.Run(fmt.Sprintf("step-%d", step), func(t *testing.T) {
			ctx := ctxFor(t)
			crashed := newFixture(t, c, inPlaceSpec("client.admin"))
			before := crashed.storedAdmin(t)
			params, _ := json.Marshal(childParams{CLI: c.CLIPath, Mon: c.MonAddr, WorkDir: crashed.b.WorkDir,
				Admin: crashed.store.admin, Rotator: crashed.store.rotator, Owner: crashed.b.Owner})
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestAdminRotationChild$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), fmt.Sprintf("REKEY_FAILPOINT=ceph-admin/step-%d", step), childEnv+"="+string(params))
			out, err := cmd.CombinedOutput()
			if !killed(err) || !strings.Contains(string(out), fmt.Sprintf("failpoint ceph-admin/step-%d hit", step)) {
				t.Fatalf("the child was not killed at step %d (err %v):\n%s", step, err, out)
			}

			// The killed process left its keyring files behind; the
			// restarted one must sweep them (checked at cleanup).
			if left, _ := filepath.Glob(filepath.Join(crashed.b.WorkDir, workPrefix+"*")); len(left) == 0 {
				t.Fatal("the killed child left no work folder: the sweep is not exercised")
			}
			admin := crashed.storedAdmin(t)
			usable := crashed.adminWorks(t, admin)
			if !usable {
				text, ok, err := crashed.store.LoadRotator(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					rot, err := parseKeyringFor(text, RotatorEntity)
					usable = err == nil && crashed.adminWorks(t, rot)
				}
			}
			if !usable {
				t.Fatalf("after a crash at step %d no stored keyring administers the cluster", step)
			}

			// A fresh backend, as a restarted manager builds it.
			f := newFixture(t, c, inPlaceSpec("client.admin"))
			f.store = crashed.store
			f.b.Store, f.b.WorkDir = crashed.store, crashed.b.WorkDir
			rec, err := f.b.RecoverAdmin(ctx)
			if err != nil {
				t.Fatalf("RecoverAdmin after a crash at step %d: %v", step, err)
			}
			// Step 9 completed the rotation; before it there was
			// something to finish (step 1: an unstored rotator to delete).
			if rec != (step < 9) {
				t.Fatalf("RecoverAdmin after step %d reported recovered=%v", step, rec)
			}
			admin = f.storedAdmin(t)
			if !f.adminWorks(t, admin) {
				t.Fatal("the stored admin keyring does not work after recovery")
			}
			if rotated := admin.Key != before.Key; rotated != (step > 1) {
				t.Fatalf("after a crash at step %d and recovery the admin key rotated=%v", step, rotated)
			}
			if _, ok := f.entities(t)[RotatorEntity]; ok {
				t.Fatal("client.admin-rotator still exists after recovery")
			}
			if f.rotatorStored(t) {
				t.Fatal("the rotator keyring is still stored after recovery")
			}
			f.noKeysInReports(t)
		})
	}
}

// killed tells whether the child died of SIGKILL, as the failpoint does it.
func killed(err error) bool {
	var xe *exec.ExitError
	if !errors.As(err, &xe) {
		return false
	}
	ws, ok := xe.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// TestAdminRotationChild is the manager that TestAdminRotationCrash kills:
// it rotates the admin key as the engine would, through Apply, with the
// failpoint armed by REKEY_FAILPOINT.
func TestAdminRotationChild(t *testing.T) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		t.Skip("run by TestAdminRotationCrash in a child process")
	}
	// A test binary reads no REKEY_FAILPOINT by itself (only the
	// rekeytest build of the manager does): the child arms it.
	failpoint.Arm(os.Getenv("REKEY_FAILPOINT"))
	var p childParams
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		t.Fatal(err)
	}
	spec := inPlaceSpec("client.admin")
	spec.Monitors = []string{p.Mon}
	store := fileStore{admin: p.Admin, rotator: p.Rotator}
	b, err := New(&spec, store, p.CLI)
	if err != nil {
		t.Fatal(err)
	}
	b.WorkDir, b.Owner = p.WorkDir, p.Owner
	// Only a guard against a hang: the steps up to a late failpoint are a
	// dozen CLI starts, and at load 46 on two cores one minute ran out at
	// step 5 (the parent's kill check then failed every later step).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	text, err := store.LoadAdmin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := parseKeyringFor(text, "client.admin")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Apply(ctx, engine.Secrets{"client.admin": kr.String()}, nil, 2)
	t.Fatalf("Apply returned (%v): the failpoint %s was never hit", err, os.Getenv("REKEY_FAILPOINT"))
}
