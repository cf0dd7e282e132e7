package ceph

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestSweepWorkDir(t *testing.T) {
	// A pid that ran and has ended: its folder is a crash's leftover.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := strconv.Itoa(cmd.Process.Pid)
	me := strconv.Itoa(os.Getpid())
	dir := t.TempDir()
	entries := []struct {
		name string
		dir  bool
		kept bool
	}{
		{workPrefix + dead + "-abc-1", true, false},               // its process is gone
		{workPrefix + me + "-" + processToken + "-1", true, true}, // this process's own
		{workPrefix + me + "-0123456789ab-1", true, false},        // this pid before a restart
		{workPrefix + "1-abc-1", true, true},                      // a process that runs
		{workPrefix + "x-abc-1", true, true},                      // not one of ours
		{"other-" + dead + "-abc-1", true, true},                  // not one of ours
		{workPrefix + dead + "-file", false, true},                // not a folder
	}
	for _, tc := range entries {
		p := filepath.Join(dir, tc.name)
		var err error
		if tc.dir {
			err = os.Mkdir(p, 0o700)
		} else {
			err = os.WriteFile(p, nil, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	sweepWorkDir(dir)
	for _, tc := range entries {
		_, err := os.Stat(filepath.Join(dir, tc.name))
		if kept := err == nil; kept != tc.kept {
			t.Errorf("%s: kept %v, want %v", tc.name, kept, tc.kept)
		}
	}
	// Once per WorkDir and process: a leftover that appears later stays.
	late := filepath.Join(dir, workPrefix+dead+"-late-1")
	if err := os.Mkdir(late, 0o700); err != nil {
		t.Fatal(err)
	}
	sweepWorkDir(dir)
	if _, err := os.Stat(late); err != nil {
		t.Errorf("second sweep of the same WorkDir removed %s", late)
	}
}
