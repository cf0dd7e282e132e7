package deployed

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// podRun is what the kubelet and a runtime would make of one pod's one
// container: the OCI bundle (image root filesystem plus config.json) and
// the host-side files the kubelet mounts into it.
type podRun struct {
	pod       *corev1.Pod
	container corev1.Container
	image     *imageConfig
	bundle    string // holds rootfs/ and config.json
	podDir    string // the kubelet's files of the pod (etc-hosts, volumes)
	saDir     string // the projected ServiceAccount volume
	env       []string
	args      []string
	uid, gid  int64

	state string // runc --root
	id    string
	cmd   *exec.Cmd
	log   string
	done  chan error
}

// resolveEnv builds the container's environment as the kubelet does: the
// image's, then the service link variables of the kubernetes Service
// (pointing at the test API server), then the container's own env with
// fieldRefs resolved from the pod. $(VAR) in values refers to earlier ones.
func (r *podRun) resolveEnv(apiHost string, apiPort int) error {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, kv := range r.image.Env {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	set("HOSTNAME", r.pod.Name)
	port := strconv.Itoa(apiPort)
	tcp := "tcp://" + apiHost + ":" + port
	for k, v := range map[string]string{
		"KUBERNETES_SERVICE_HOST": apiHost, "KUBERNETES_SERVICE_PORT": port, "KUBERNETES_SERVICE_PORT_HTTPS": port,
		"KUBERNETES_PORT": tcp, "KUBERNETES_PORT_" + port + "_TCP": tcp,
		"KUBERNETES_PORT_" + port + "_TCP_PROTO": "tcp", "KUBERNETES_PORT_" + port + "_TCP_PORT": port,
		"KUBERNETES_PORT_" + port + "_TCP_ADDR": apiHost,
	} {
		set(k, v)
	}
	for _, e := range r.container.Env {
		switch {
		case e.ValueFrom == nil:
			set(e.Name, expand(e.Value, vars))
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.namespace":
				set(e.Name, r.pod.Namespace)
			case "metadata.name":
				set(e.Name, r.pod.Name)
			case "spec.serviceAccountName":
				set(e.Name, r.pod.Spec.ServiceAccountName)
			default:
				return fmt.Errorf("env %s: fieldRef %s is not resolved by this test", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		default:
			return fmt.Errorf("env %s: only values and fieldRefs are resolved by this test", e.Name)
		}
	}
	r.env = nil
	for _, k := range order {
		r.env = append(r.env, k+"="+vars[k])
	}
	// The command: the container's, else the image's entrypoint; then the
	// container's args, else the image's cmd; $(VAR) expanded.
	cmd, args := r.container.Command, r.container.Args
	if len(cmd) == 0 {
		cmd = r.image.Entrypoint
		if len(args) == 0 {
			args = r.image.Cmd
		}
	}
	r.args = nil
	for _, a := range append(append([]string{}, cmd...), args...) {
		r.args = append(r.args, expand(a, vars))
	}
	return nil
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func expand(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// quantityBytes parses the resource quantities the chart uses (Mi, Gi).
func quantityBytes(q string) (int64, error) {
	for suf, mul := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if n, ok := strings.CutSuffix(q, suf); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * mul, err
		}
	}
	return strconv.ParseInt(q, 10, 64)
}

// writeConfig writes config.json: the pod's user, the container's
// securityContext (read-only root, no privilege escalation, every
// capability dropped), its volumes (emptyDir; the projected ServiceAccount
// token the kubelet adds), the kubelet's /etc/hosts, /etc/hostname,
// /etc/resolv.conf and /dev/termination-log, and its memory and CPU
// limits. Not as in a cluster: the host's network namespace (the servers
// listen on the host's loopback), no seccomp profile, and no rlimits
// (runc cannot set them here).
func (r *podRun) writeConfig() error {
	sc := r.container.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		return fmt.Errorf("the chart's container does not ask for a read-only root")
	}
	noNewPrivs := sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0 {
		return fmt.Errorf("the chart's container capabilities %+v: this test runs drop [ALL] only", sc.Capabilities)
	}
	files := map[string]string{
		"etc-hosts":       fmt.Sprintf("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.0.1\t%s\n", r.pod.Name),
		"etc-hostname":    r.pod.Name + "\n",
		"resolv.conf":     fmt.Sprintf("search %s.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n", r.pod.Namespace),
		"termination-log": "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(r.podDir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	bind := func(dst, src string, ro bool) map[string]any {
		opts := []string{"rbind", "nosuid", "nodev"}
		if ro {
			opts = append(opts, "ro")
		}
		return map[string]any{"destination": dst, "type": "bind", "source": src, "options": opts}
	}
	mounts := []map[string]any{
		{"destination": "/proc", "type": "proc", "source": "proc"},
		{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": []string{"nosuid", "noexec", "nodev"}},
		{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
		bind("/etc/hosts", filepath.Join(r.podDir, "etc-hosts"), true),
		bind("/etc/hostname", filepath.Join(r.podDir, "etc-hostname"), true),
		bind("/etc/resolv.conf", filepath.Join(r.podDir, "resolv.conf"), true),
		bind("/dev/termination-log", filepath.Join(r.podDir, "termination-log"), false),
		bind("/var/run/secrets/kubernetes.io/serviceaccount", r.saDir, true),
	}
	vols := map[string]corev1.Volume{}
	for _, v := range r.pod.Spec.Volumes {
		vols[v.Name] = v
	}
	for _, vm := range r.container.VolumeMounts {
		v, ok := vols[vm.Name]
		switch {
		case !ok:
			return fmt.Errorf("volumeMount %s names no volume", vm.Name)
		case v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory:
			opts := []string{"nosuid", "nodev", "mode=777"}
			if v.EmptyDir.SizeLimit != nil {
				opts = append(opts, fmt.Sprintf("size=%d", v.EmptyDir.SizeLimit.Value()))
			}
			if vm.ReadOnly {
				opts = append(opts, "ro")
			}
			mounts = append(mounts, map[string]any{"destination": vm.MountPath, "type": "tmpfs", "source": "tmpfs", "options": opts})
		case v.EmptyDir != nil:
			dir := filepath.Join(r.podDir, "volumes", v.Name)
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return err
			}
			os.Chmod(dir, 0o777)
			mounts = append(mounts, bind(vm.MountPath, dir, vm.ReadOnly))
		default:
			return fmt.Errorf("volume %s: only emptyDir is mounted by this test; the chart gained another kind", v.Name)
		}
	}
	linux := map[string]any{
		"namespaces": []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}},
		"maskedPaths": []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
			"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"},
		"readonlyPaths": []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
	}
	res := map[string]any{}
	if mem, ok := r.container.Resources.Limits[corev1.ResourceMemory]; ok {
		res["memory"] = map[string]any{"limit": mem.Value()}
	}
	if cpu, ok := r.container.Resources.Limits[corev1.ResourceCPU]; ok {
		res["cpu"] = map[string]any{"quota": cpu.MilliValue() * 100, "period": 100000}
	}
	if len(res) > 0 {
		linux["resources"] = res
		linux["cgroupsPath"] = "/" + r.id // runc delete removes it
	}
	cwd := r.image.WorkingDir
	if r.container.WorkingDir != "" {
		cwd = r.container.WorkingDir
	}
	if cwd == "" {
		cwd = "/"
	}
	cfg := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"terminal":        false,
			"user":            map[string]any{"uid": r.uid, "gid": r.gid},
			"args":            r.args,
			"env":             r.env,
			"cwd":             cwd,
			"noNewPrivileges": noNewPrivs,
			"capabilities":    map[string][]string{"bounding": {}, "effective": {}, "inheritable": {}, "permitted": {}, "ambient": {}},
		},
		"root":     map[string]any{"path": "rootfs", "readonly": true},
		"hostname": r.pod.Name,
		"mounts":   mounts,
		"linux":    linux,
	}
	b, err := json.MarshalIndent(cfg, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.bundle, "config.json"), b, 0o644)
}

// start runs the container with runc, its output in r.log.
func (r *podRun) start() error {
	logf, err := os.Create(r.log)
	if err != nil {
		return err
	}
	r.cmd = exec.Command("runc", "--root", r.state, "run", "--bundle", r.bundle, r.id)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	r.done = make(chan error, 1)
	go func() { r.done <- r.cmd.Wait(); logf.Close() }()
	return nil
}

// stop is the kubelet's stop: SIGTERM, then SIGKILL after the pod's
// termination grace period. It reports how the container ended.
func (r *podRun) stop() (string, error) {
	if r.cmd == nil {
		return "not started", nil
	}
	select {
	case err := <-r.done:
		r.done <- err
		return fmt.Sprintf("had exited before the stop: %v", err), nil
	default:
	}
	grace := 30 * time.Second
	if g := r.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	start := time.Now()
	_ = exec.Command("runc", "--root", r.state, "kill", r.id, "TERM").Run()
	var how string
	select {
	case err := <-r.done:
		how = fmt.Sprintf("stopped by SIGTERM in %s (%v)", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(grace):
		_ = exec.Command("runc", "--root", r.state, "kill", r.id, "KILL").Run()
		<-r.done
		how = fmt.Sprintf("killed after the %s grace period", grace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "runc", "--root", r.state, "delete", "--force", r.id).CombinedOutput(); err != nil {
		return how, fmt.Errorf("runc delete: %v: %s", err, out)
	}
	return how, nil
}

// exited reports whether the container has ended.
func (r *podRun) exited() (bool, error) {
	select {
	case err := <-r.done:
		r.done <- err
		return true, err
	default:
		return false, nil
	}
}

// peakMemory is the container's highest memory use so far (cgroup v1's
// memory.max_usage_in_bytes), or -1 when it cannot be read.
func (r *podRun) peakMemory() int64 {
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", r.id, "memory.max_usage_in_bytes"))
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}
