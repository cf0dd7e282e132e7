package ceph

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Work folders are named rekey-ceph-<pid>-<token>-<random>. A process that
// dies mid-operation (a crash, an OOM kill) leaves its folder behind,
// keyring files included; the next process to use the WorkDir removes it.
const workPrefix = "rekey-ceph-"

var (
	processToken = newToken()
	swept        sync.Map // WorkDir → struct{}: swept once per process
)

func newToken() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// workFolderPattern is this process's os.MkdirTemp pattern.
func workFolderPattern() string {
	return workPrefix + strconv.Itoa(os.Getpid()) + "-" + processToken + "-*"
}

// sweepWorkDir removes folders of processes that no longer run, once per
// WorkDir and process. A folder whose pid runs is left alone unless that
// pid is this process under another token: a restarted container reuses
// its pid.
func sweepWorkDir(dir string) {
	if _, done := swept.LoadOrStore(dir, struct{}{}); done {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), workPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, tail, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil {
			continue // not one of ours
		}
		ours := pid == os.Getpid()
		if ours && strings.HasPrefix(tail, processToken+"-") || !ours && alive(pid) {
			continue
		}
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}
