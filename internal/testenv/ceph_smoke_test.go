package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCephSmoke proves, on a real ceph-mon, what the Ceph backend is built
// on: cephx entities with caps, telling a refused key from refused caps, and
// Tentacle's `ceph auth rotate`. If it fails after a version bump, the
// backend's assumptions no longer hold.
func TestCephSmoke(t *testing.T) {
	c := CephForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// `ceph version` (no dashes) asks the running mon, not the CLI.
	out, err := c.CLI(ctx, "version")
	if err != nil {
		t.Fatal(err)
	}
	if v := strings.TrimSpace(string(out)); !strings.HasPrefix(v, "ceph version "+c.Version+" ") {
		t.Fatalf("mon reports %q, want ceph version %s", v, c.Version)
	} else {
		t.Logf("server version: %s", v)
	}

	const entity = "client.smoke"
	out, err = c.CLI(ctx, "auth", "get-or-create", entity, "mon", "allow r", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	oldKey := keyOf(t, out, entity)
	if k, err := c.Key(ctx, entity); err != nil || k != oldKey {
		t.Fatalf("auth get %s disagrees with get-or-create (err %v)", entity, err)
	}

	t.Run("a key authenticates; a wrong key and refused caps fail differently", func(t *testing.T) {
		if _, err := c.CLIAs(ctx, entity, oldKey, "mon", "stat"); err != nil {
			t.Fatalf("%s with its key: %v", entity, err)
		}
		// Another valid key, but not this entity's.
		adminKey, err := c.Key(ctx, "client.admin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CLIAs(ctx, entity, adminKey, "mon", "stat"); !errors.Is(err, ErrCephAuth) {
			t.Fatalf("%s with a wrong key: got %v, want ErrCephAuth", entity, err)
		}
		// mon 'allow r' does not cover auth commands: authenticated, then refused.
		_, err = c.CLIAs(ctx, entity, oldKey, "auth", "ls")
		if err == nil || errors.Is(err, ErrCephAuth) {
			t.Fatalf("%s auth ls under mon 'allow r': got %v, want a caps refusal that is not ErrCephAuth", entity, err)
		}
	})

	t.Run("auth rotate replaces the key at once and keeps the caps", func(t *testing.T) {
		// The new key comes back in the output (a leading newline, then a
		// JSON array of one entry with entity, key and caps).
		out, err := c.CLI(ctx, "auth", "rotate", entity, "--format", "json")
		if err != nil {
			t.Fatal(err)
		}
		newKey := keyOf(t, out, entity)
		var entries []struct {
			Caps map[string]string `json:"caps"`
		}
		if err := json.Unmarshal(out, &entries); err != nil || len(entries) != 1 || entries[0].Caps["mon"] != "allow r" || len(entries[0].Caps) != 1 {
			t.Fatalf("caps after rotate: %+v (%v), want only mon 'allow r'", entries, err)
		}
		if newKey == oldKey {
			t.Fatal("auth rotate returned the old key")
		}
		if k, err := c.Key(ctx, entity); err != nil || k != newKey {
			t.Fatalf("auth get after rotate does not return the rotated key (err %v)", err)
		}
		if _, err := c.CLIAs(ctx, entity, newKey, "mon", "stat"); err != nil {
			t.Fatalf("%s with the rotated key: %v", entity, err)
		}
		// No overlap: a new authentication with the old key is refused
		// immediately after rotate (live sessions keep their tickets until
		// they expire, which a CLI call cannot show). This is why rekey
		// uses InPlace only where the operator restarts every consumer.
		if _, err := c.CLIAs(ctx, entity, oldKey, "mon", "stat"); !errors.Is(err, ErrCephAuth) {
			t.Fatalf("%s with the pre-rotation key: got %v, want ErrCephAuth", entity, err)
		}
		if _, err := c.CLI(ctx, "auth", "rotate", "client.nothere"); err == nil {
			t.Fatal("auth rotate of a missing entity succeeded")
		}
	})

	t.Run("the host-side CLI wrapper reaches the cluster with a host keyring path", func(t *testing.T) {
		for _, args := range [][]string{
			{"-n", "client.admin", "--keyring", c.AdminKeyring.Host, "fsid"},
			{"-n", "client.admin", "--keyring=" + c.AdminKeyring.Host, "fsid"},
		} {
			out, err := exec.CommandContext(ctx, c.CLIPath, args...).Output()
			if err != nil {
				t.Fatalf("%s %s: %v", c.CLIPath, args[2], err)
			}
			if got := strings.TrimSpace(string(out)); got != c.FSID {
				t.Fatalf("wrapper fsid = %q, want %q", got, c.FSID)
			}
		}
	})
}

// keyOf reads the entity's key from `ceph auth … --format json` output,
// failing the test without ever printing the key.
func keyOf(t *testing.T, out []byte, entity string) string {
	t.Helper()
	var entries []struct {
		Entity string `json:"entity"`
		Key    string `json:"key"`
	}
	if err := json.Unmarshal(out, &entries); err != nil {
		t.Fatalf("unreadable auth output for %s: %v", entity, err)
	}
	if len(entries) != 1 || entries[0].Entity != entity || entries[0].Key == "" {
		t.Fatalf("auth output: %d entries, none with a key for %s", len(entries), entity)
	}
	return entries[0].Key
}
