package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/naming"
)

// The suite-wide secret scan (no secret outside Secrets): while the suite runs, a
// sampler records every secret value any rekey-managed Secret holds — every
// generation of every set, since rotations take seconds and it samples
// four times a second. At the end, everything the operator produced (the
// in-process managers' log, every manager process's log, every Event,
// every CredentialSet with its status and annotations) is searched for all
// of them. Per-test scans check their own passwords at the moment; this
// one covers what they cannot name.

// processLogDir keeps every manager process's log until the scan.
var processLogDir string

type secretSampler struct {
	mu     sync.Mutex
	values map[string]string // value → where it was seen first
	// kept holds the sets deleted when their test ended, as they were:
	// the scan searches them with the sets still there.
	kept [][]byte
	stop chan struct{}
	done chan struct{}
}

// samplers are the running samplers by API server address.
var samplers = struct {
	sync.Mutex
	by map[string]*secretSampler
}{by: map[string]*secretSampler{}}

// startSecretSampler samples the Secrets of the API server at host, which
// c talks to.
func startSecretSampler(c client.Client, host string) *secretSampler {
	s := &secretSampler{values: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	samplers.Lock()
	samplers.by[host] = s
	samplers.Unlock()
	go func() {
		defer close(s.done)
		for {
			s.sample(c)
			select {
			case <-s.stop:
				s.sample(c)
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *secretSampler) sample(c client.Client) {
	var list corev1.SecretList
	if err := c.List(context.Background(), &list, client.MatchingLabels{naming.ManagedByLabel: naming.ManagedByValue}); err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sec := range list.Items {
		for k, v := range sec.Data {
			for _, secret := range secretsIn(k, string(v)) {
				if _, ok := s.values[secret]; !ok {
					s.values[secret] = sec.Namespace + "/" + sec.Name + ":" + k
				}
			}
		}
	}
}

// keepForScan keeps a set about to be deleted for the scan of the sampler
// of the API server at host.
func keepForScan(host string, cs *v1.CredentialSet) {
	samplers.Lock()
	s := samplers.by[host]
	samplers.Unlock()
	if s == nil {
		return
	}
	b, _ := json.Marshal(cs)
	s.mu.Lock()
	s.kept = append(s.kept, b)
	s.mu.Unlock()
}

// secretsIn picks the secret material out of one Secret value: passwords
// whole, cephx keys out of keyrings; names and IDs are not secret.
func secretsIn(key, value string) []string {
	base := strings.TrimSuffix(key, "_PENDING")
	if base == "username" || base == "ROTATION_ID" || strings.HasSuffix(base, ".name") || strings.HasSuffix(base, ".id") ||
		base == "userID" || base == "adminID" { // ceph-csi's entity ids (format CephCSI)
		return nil
	}
	var out []string
	for _, line := range strings.Split(value, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "key" {
			out = append(out, strings.TrimSpace(v))
		}
	}
	if len(out) == 0 && !strings.Contains(value, "\n") && !strings.Contains(value, "://") {
		out = append(out, value)
	}
	var long []string
	for _, v := range out {
		if len(v) >= 16 { // shorter values would match by chance
			long = append(long, v)
		}
	}
	return long
}

// scan stops the sampler and searches everything the operator produced.
func (s *secretSampler) scan(c client.Client) error {
	close(s.stop)
	<-s.done
	var hay strings.Builder
	files := []string{managerLog}
	if processLogDir != "" {
		logs, _ := filepath.Glob(filepath.Join(processLogDir, "*.log"))
		files = append(files, logs...)
	}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			hay.Write(b)
		}
	}
	var evs eventsv1.EventList
	if err := c.List(context.Background(), &evs); err != nil {
		return err
	}
	for _, e := range evs.Items {
		hay.WriteString(e.Reason + " " + e.Note + "\n")
	}
	var sets v1.CredentialSetList
	if err := c.List(context.Background(), &sets); err != nil {
		return err
	}
	for _, cs := range sets.Items {
		b, _ := json.Marshal(cs)
		hay.Write(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.kept {
		hay.Write(b)
	}
	text := hay.String()
	for v, where := range s.values {
		if strings.Contains(text, v) {
			return fmt.Errorf("secret scan: the secret held in %s appears in the operator's logs, events or CredentialSets", where)
		}
	}
	fmt.Printf("secret scan: %d secret values sampled from rekey's Secrets; none in %d log files (%d bytes), %d events, %d CredentialSets (%d of them deleted when their test ended)\n",
		len(s.values), len(files), hay.Len(), len(evs.Items), len(sets.Items)+len(s.kept), len(s.kept))
	return nil
}
