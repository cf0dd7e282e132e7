package ceph

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/reason"
)

// recordingCLI is the test environment's CLI behind a script that appends
// every command line it is given to a log: what the backend ran, exactly.
func recordingCLI(t *testing.T, dir, real string) (cli, log string) {
	t.Helper()
	cli, log = filepath.Join(dir, "ceph-recording"), filepath.Join(dir, "ceph-calls.log")
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + log + "'\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return cli, log
}

func calls(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// A hostile cap or config option never reaches the CLI: New refuses the
// spec, and a backend built around New (a spec that did not pass the API
// server, a future caller) is stopped at exec. Nothing runs, nothing
// changes on the real mon, and no file of the manager's is read.
func TestHostileSpecValuesRunNothing(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	dir := filepath.Join(c.Dir.Host, "hostile")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cli, log := recordingCLI(t, dir, c.CLIPath)
	mon := []string{c.MonAddr}
	caps := map[string]v1.CephCaps{
		"a cap reading a file":   {Mon: "-i/etc/passwd"},
		"a cap naming a keyring": {Mon: "--keyring=/etc/ceph/ceph.client.admin.keyring"},
		"a cap with a newline":   {Mon: "allow r\n[global]\nlog_file = /tmp/x"},
		"a second clause option": {Mon: "allow r, -o/tmp/x"},
	}
	for name, cp := range caps {
		spec := v1.CephSpec{Monitors: mon, Entities: []v1.CephEntity{{Name: "client.hostile", Caps: cp}}}
		_, err := New(&spec, fileStore{}, cli)
		if err == nil || !strings.Contains(err.Error(), "caps.mon") {
			t.Errorf("%s: New = %v, want a refusal naming caps.mon", name, err)
		}
	}
	for _, opt := range [][2]string{{"log_file", "/tmp/rekey-hostile.log"}, {"admin_socket", "/tmp/rekey-hostile.asok"},
		{"keyring", "/etc/passwd"}, {"ms_mon_client_mode", "secure\nlog_file = /tmp/x"}} {
		spec := v1.CephSpec{Monitors: mon, Config: map[string]v1.CephConfigValue{opt[0]: v1.CephConfigValue(opt[1])}, Entities: []v1.CephEntity{{Name: "client.hostile"}}}
		_, err := New(&spec, fileStore{}, cli)
		if err == nil || !strings.Contains(err.Error(), "spec.ceph.config") {
			t.Errorf("config %s: New = %v, want a refusal naming spec.ceph.config", opt[0], err)
		}
	}

	// Defence in depth: the same values put into a backend behind New's
	// back are refused before any command runs, and a hostile word handed
	// to the session is refused where the CLI would run.
	f := newFixtureCLI(t, c, inPlaceSpec("client.hostile"), cli)
	for name, cp := range caps {
		f.b.entities = []v1.CephEntity{{Name: "client.hostile", Caps: cp}}
		_, err := f.b.Provision(ctxFor(t), nil)
		if err == nil || !strings.Contains(err.Error(), "caps.mon") {
			t.Errorf("%s: Provision = %v, want a refusal naming caps.mon", name, err)
		}
	}
	f.b.entities = []v1.CephEntity{{Name: "client.hostile"}}
	s, err := f.b.open(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for _, args := range [][]string{
		{"auth", "get-or-create", "client.hostile", "mon", "-i/etc/passwd"},
		{"auth", "get-or-create", "client.hostile", "mon", "allow r\n[global]"},
		{"auth", "get", "--keyring=/etc/passwd"},
		{"auth", "get", "client.hostile", "-o", "/tmp/x"},
	} {
		if _, err := s.run(ctxFor(t), args...); err == nil || !strings.Contains(err.Error(), "refused to run") {
			t.Errorf("run %q = %v, want the exec check's refusal", args, err)
		}
	}
	if got := calls(t, log); len(got) > 0 {
		t.Fatalf("the CLI ran %d times for hostile specs, want never: %q", len(got), got)
	}
	if _, ok := f.entities(t)["client.hostile"]; ok {
		t.Fatal("client.hostile exists: a hostile spec created it")
	}
	if rec := f.recordOf(t, "client.hostile"); rec != "" {
		t.Fatal("a hostile spec left an ownership record")
	}
}

// The command words follow "--" on every command line, and the real
// Tentacle CLI takes them as words there: a word that looks like an option
// stays a word of the mon command (the mon refuses it as a cap) instead of
// making the CLI read a file.
func TestDoubleDashOnTheRealCLI(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	dir := filepath.Join(c.Dir.Host, "dashdash")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cli, log := recordingCLI(t, dir, c.CLIPath)
	f := newFixtureCLI(t, c, inPlaceSpec("client.dashdash"), cli)
	ctx := ctxFor(t)
	p, err := f.b.Provision(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.mustAuth(t, keyringIn(t, p.Secrets, "client.dashdash"), true)
	if v, err := f.b.Version(ctx, nil); err != nil || v != c.Version {
		t.Fatalf("Version after --: %q, %v", v, err)
	}
	all := calls(t, log)
	if len(all) == 0 {
		t.Fatal("no calls recorded")
	}
	for _, l := range all {
		if !strings.Contains(l, " -- ") {
			t.Fatalf("a command line without --: %q", l)
		}
	}

	// Straight to the CLI, past rekey's checks: with -- the would-be option
	// is a cap, which the mon refuses; the marker file is never read.
	marker := filepath.Join(dir, "marker")
	if err := os.WriteFile(marker, []byte("not for the mon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := c.AdminKeyring.Host
	cmd := exec.CommandContext(ctx, c.CLIPath, "-n", "client.admin", "-k", admin, "--verbose", "--",
		"auth", "get-or-create", "client.dashdash-hostile", "mon", "-i"+marker)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the mon accepted a cap %q:\n%s", "-i"+marker, out)
	}
	if !strings.Contains(string(out), "input_file=None") {
		t.Fatalf("after --, the CLI read -i as its option:\n%s", out)
	}
	if _, ok := f.entities(t)["client.dashdash-hostile"]; ok {
		t.Fatal("the hostile entity was created")
	}
	t.Logf("the mon's answer to a cap after --: %s", lastLine(string(out)))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Ownership on the real mon: rekey deletes or rotates only entities it
// recorded for this very set. A hand-made generation entity is neither
// deleted as an orphan nor retired as a prior; another set cannot adopt or
// rotate an entity recorded for the first; each refusal names the entity
// and the next step, and leaves the cluster as it was.
func TestOwnershipOnTheRealMon(t *testing.T) {
	c := sharedCeph(t)
	t.Parallel()
	ctx := ctxFor(t)

	t.Run("a hand-made newer generation is not deleted as an orphan", func(t *testing.T) {
		base := "client.own-orphan"
		f := newFixture(t, c, overlapSpec(1, base))
		p, err := f.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if f.recordOf(t, base+".1") == "" {
			t.Fatalf("%s.1 was created without a record", base)
		}
		stranger := f.create(t, base+".5", "mon", "allow r")
		_, err = f.b.Apply(ctx, p.Secrets, nil, 2)
		msg := f.wantRefusal(t, err, reason.NotOwned, base+".5")
		if !strings.Contains(msg, "ceph auth rm "+base+".5") {
			t.Fatalf("the refusal does not say what to do: %s", msg)
		}
		if got := f.generationsOf(t, base); !slices.Equal(got, []int64{5, 1}) {
			t.Fatalf("generations after the refusal: %v, want [5 1]: nothing created, nothing deleted", got)
		}
		f.mustAuth(t, stranger, true)
	})

	t.Run("a hand-made prior is not retired", func(t *testing.T) {
		base := "client.own-prior"
		f := newFixture(t, c, overlapSpec(0, base))
		p, err := f.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		pending, err := f.b.Apply(ctx, p.Secrets, nil, 2)
		if err != nil {
			t.Fatal(err)
		}
		stranger := f.create(t, base, "mon", "allow r") // generation 0 by its name
		f.wantRefusal(t, f.b.Retire(ctx, p.Secrets, pending), reason.NotOwned, base)
		if got := f.generationsOf(t, base); !slices.Equal(got, []int64{2, 1, 0}) {
			t.Fatalf("generations after the refusal: %v, want [2 1 0]: nothing deleted", got)
		}
		f.mustAuth(t, stranger, true)
		f.mustAuth(t, keyringIn(t, p.Secrets, base), true)
	})

	t.Run("a second set cannot take an entity over", func(t *testing.T) {
		const name = "client.own-shared"
		first := newFixture(t, c, inPlaceSpec(name))
		p, err := first.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		key := keyringIn(t, p.Secrets, name)
		second := newFixture(t, c, inPlaceSpec(name))
		second.b.Owner = Owner{UID: "0b5e7c1e-0000-4000-8000-000000000002", Set: "other/thief"}
		_, err = second.b.Provision(ctx, nil)
		msg := second.wantRefusal(t, err, reason.NotOwned, name)
		if !strings.Contains(msg, first.b.Owner.Set) {
			t.Fatalf("the refusal does not name the owning set: %s", msg)
		}
		// Even holding the current key (a copy of the first set's source
		// Secret), the second set may not rotate it.
		second.wantRefusal(t, second.b.Precheck(ctx, p.Secrets), reason.NotOwned, name)
		_, err = second.b.Apply(ctx, p.Secrets, nil, 2)
		second.wantRefusal(t, err, reason.NotOwned, name)
		if k, err := c.Key(ctx, name); err != nil || k != key.Key {
			t.Fatalf("%s's key changed (%v): a refused set rotated it", name, err)
		}
		// The first set still rotates it.
		if err := first.b.Precheck(ctx, p.Secrets); err != nil {
			t.Fatal(err)
		}
		pending, err := first.b.Apply(ctx, p.Secrets, nil, 2)
		if err != nil {
			t.Fatal(err)
		}
		first.mustAuth(t, keyringIn(t, pending, name), true)
	})

	t.Run("InPlace adopts a key that exists and records it", func(t *testing.T) {
		const name = "client.own-adopt"
		f := newFixture(t, c, inPlaceSpec(name))
		existing := f.create(t, name, "mon", "allow r")
		p, err := f.b.Provision(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if keyringIn(t, p.Secrets, name) != existing || !strings.HasPrefix(f.recordOf(t, name), f.b.Owner.UID+" ") {
			t.Fatalf("%s was not adopted and recorded for the set", name)
		}
	})
}
