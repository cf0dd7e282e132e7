package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// clockTick is USER_HZ, the unit of /proc CPU times (100 on Linux).
const clockTick = 100.0

// cpuSample is CPU time so far: the machine's (busy and I/O wait, over all
// cores) and, by command name, this process's children (kube-apiserver,
// etcd, mysqld) plus "self" (the test binary: the manager, the load and
// the toxiproxy latency proxies).
type cpuSample struct {
	busy, iowait, total float64 // seconds, machine-wide
	procs               map[string]float64
}

func sampleCPU() cpuSample {
	s := cpuSample{procs: map[string]float64{}}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for i, v := range f[1:] {
			x, _ := strconv.ParseFloat(v, 64)
			if i >= 8 { // guest time is already in user
				break
			}
			s.total += x / clockTick
			switch i {
			case 3: // idle
			case 4:
				s.iowait += x / clockTick
			default:
				s.busy += x / clockTick
			}
		}
	}
	self := strconv.Itoa(os.Getpid())
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15)
		open, close := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		if open < 0 || close < open {
			continue
		}
		comm, rest := string(b[open+1:close]), strings.Fields(string(b[close+1:]))
		if len(rest) < 13 {
			continue
		}
		pid := strings.Fields(string(b[:open]))[0]
		switch {
		case pid == self:
			comm = "self"
		case rest[1] != self:
			continue
		}
		ut, _ := strconv.ParseFloat(rest[11], 64)
		st, _ := strconv.ParseFloat(rest[12], 64)
		s.procs[comm] += (ut + st) / clockTick
	}
	return s
}

// cpuUse is what happened between two samples, in percent of one core for
// processes and of the whole machine for busy and iowait.
type cpuUse struct {
	busy, iowait float64
	procs        map[string]float64
}

func (a cpuSample) until(b cpuSample) cpuUse {
	u := cpuUse{procs: map[string]float64{}}
	total := b.total - a.total // wall time × cores
	if total <= 0 {
		return u
	}
	u.busy = 100 * (b.busy - a.busy) / total
	u.iowait = 100 * (b.iowait - a.iowait) / total
	for k, v := range b.procs {
		u.procs[k] = 100 * (v - a.procs[k]) * float64(runtime.NumCPU()) / total
	}
	return u
}
