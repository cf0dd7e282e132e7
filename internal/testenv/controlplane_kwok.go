package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

const (
	// HoldReadyAnnotation holds a pod not Ready for as long as the pod
	// carries it (any value). A new pod with it goes Running with its
	// containers started but not ready, as if a readiness probe failed; a
	// Ready pod that gets it turns not Ready. Removing it (ReleasePodReady)
	// makes the pod Ready again. Put it in a StatefulSet's pod template to
	// stop a rolling update at the first recreated pod, then release the
	// pods one at a time; note that changing the template is itself a
	// rollout.
	HoldReadyAnnotation = "rekey.io/test-hold-ready"
	// ReadyDelayAnnotation delays a pod's readiness by a Go duration
	// ("5s"), counted from the moment kwok sees the pod not Ready.
	ReadyDelayAnnotation = "rekey.io/test-ready-delay"

	kwokNodeAnnotation = "kwok.x-k8s.io/node"
)

// holdStage puts pods carrying HoldReadyAnnotation into Running with every
// container started and none ready. It matches Pending pods and Ready ones,
// never a pod it already held, so it does not loop. A pod keeps the IP it
// has: kwok's PodIPsWith hands out a fresh address on every call, and the
// status patch would merge both into podIPs, which the apiserver refuses.
const holdStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: rekey-pod-hold-not-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.metadata.annotations["` + HoldReadyAnnotation + `"]'
      operator: 'Exists'
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending', 'Running']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['False']
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $start := or .status.startTime $now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        reason: HeldByTest
        message: "held not ready by annotation ` + HoldReadyAnnotation + `"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        reason: HeldByTest
        type: ContainersReady
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $start | Quote }}
      {{ end }}
      {{ $hostIPs := NodeIPsWith .spec.nodeName }}
      {{ with $hostIPs }}
      hostIP: {{ index . 0 | Quote }}
      hostIPs:
      {{ range . }}
      - ip: {{ . | Quote }}
      {{ end }}
      {{ end }}
      {{ if not .status.podIP }}
      {{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
      {{ with $podIPs }}
      podIP: {{ index . 0 | Quote }}
      podIPs:
      {{ range . }}
      - ip: {{ . | Quote }}
      {{ end }}
      {{ end }}
      {{ end }}
      phase: Running
      startTime: {{ $start | Quote }}
`

// writeKwokStages writes the stages kwok plays, in one multi-document file:
// the ones shipped with kwok (copied by hack/env/control-plane.sh), with
// pod-ready changed to honour the two annotations above, plus holdStage.
func (c *ControlPlane) writeKwokStages() (string, error) {
	files, err := filepath.Glob(filepath.Join(c.env.BinDir, "kwok-stages", "*.yaml"))
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	var out bytes.Buffer
	sawReady := false
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if filepath.Base(f) == "pod-fast-pod-ready.yaml" {
			if data, err = patchPodReadyStage(data); err != nil {
				return "", fmt.Errorf("%s: %w", f, err)
			}
			sawReady = true
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	if !sawReady {
		return "", fmt.Errorf("no pod-fast-pod-ready.yaml in %s: run `make env`", filepath.Join(c.env.BinDir, "kwok-stages"))
	}
	out.WriteString("---\n" + holdStage)
	path := filepath.Join(c.Dir, "kwok-stages.yaml")
	return path, os.WriteFile(path, out.Bytes(), 0o644)
}

// patchPodReadyStage makes kwok's pod-ready stage skip held pods, pick up
// released ones (Running but not Ready, which upstream never produces) and
// wait ReadyDelayAnnotation first.
func patchPodReadyStage(data []byte) ([]byte, error) {
	var stage map[string]any
	if err := yaml.Unmarshal(data, &stage); err != nil {
		return nil, err
	}
	spec, _ := stage["spec"].(map[string]any)
	sel, _ := spec["selector"].(map[string]any)
	exprs, _ := sel["matchExpressions"].([]any)
	patched := false
	for _, x := range exprs {
		m, _ := x.(map[string]any)
		if m["key"] == ".status.phase" {
			m["values"] = []any{"Pending", "Running"}
			patched = true
		}
	}
	if !patched {
		return nil, fmt.Errorf("pod-ready stage has no .status.phase selector: kwok's stage format changed")
	}
	sel["matchExpressions"] = append(exprs, map[string]any{
		"key":      `.metadata.annotations["` + HoldReadyAnnotation + `"]`,
		"operator": "DoesNotExist",
	})
	next, _ := spec["next"].(map[string]any)
	tmpl, _ := next["statusTemplate"].(string)
	// Upstream plays pod-ready once per pod; a released pod already has an
	// IP, and a second one from PodIPsWith would make podIPs invalid.
	i := strings.Index(tmpl, "{{ $podIPs := PodIPsWith")
	j := strings.Index(tmpl, "phase: Running")
	if i < 0 || j < i {
		return nil, fmt.Errorf("pod-ready stage template has no PodIPsWith block: kwok's stage changed")
	}
	next["statusTemplate"] = tmpl[:i] + "{{ if not .status.podIP }}\n" + tmpl[i:j] + "{{ end }}\n" + tmpl[j:]
	if _, ok := spec["delay"]; ok {
		return nil, fmt.Errorf("pod-ready stage already has a delay: kwok's stage changed")
	}
	// A pod without the annotation gets the 0ms default.
	spec["delay"] = map[string]any{
		"durationMilliseconds": 0,
		"durationFrom":         map[string]any{"jq": map[string]any{"expression": `.metadata.annotations["` + ReadyDelayAnnotation + `"]`}},
	}
	return yaml.Marshal(stage)
}

// AddFakeNode creates a node kwok manages: untainted, with room for 110
// pods. Its status turns Ready within a second or two (WaitNodeReady).
func (c *ControlPlane) AddFakeNode(ctx context.Context, name string) (*corev1.Node, error) {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				kwokNodeAnnotation:             "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
		},
		// The kubelet registers a node with its capacity in the create
		// call; kwok's node-initialize stage keeps what is there.
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	return c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
}

// WaitNodeReady waits until kwok reports the node Ready.
func (c *ControlPlane) WaitNodeReady(ctx context.Context, name string) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready (kwok log: %s): %w", name, filepath.Join(c.Dir, "kwok.log"), err)
	}
	return nil
}

// HoldPodReady annotates a live pod with HoldReadyAnnotation: kwok turns it
// not Ready, as a failing readiness probe would.
func (c *ControlPlane) HoldPodReady(ctx context.Context, namespace, name string) error {
	return c.annotatePod(ctx, namespace, name, HoldReadyAnnotation, "true")
}

// ReleasePodReady removes HoldReadyAnnotation: kwok makes the pod Ready.
func (c *ControlPlane) ReleasePodReady(ctx context.Context, namespace, name string) error {
	return c.annotatePod(ctx, namespace, name, HoldReadyAnnotation, nil)
}

func (c *ControlPlane) annotatePod(ctx context.Context, namespace, name, key string, value any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	if err != nil {
		return err
	}
	_, err = c.kube.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
