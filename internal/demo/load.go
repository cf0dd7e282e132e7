package demo

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/testenv"
)

// load plays the consumer's pods: each pod reads the distributed Secret
// once, when it starts (as env vars from a Secret are read), and then logs
// in continuously with what it read, round-robin over the instances. A
// rollout replaces pods, and the new ones read the Secret again.
type load struct {
	k8s       client.Client
	namespace string
	selector  map[string]string
	secret    string
	user, key string
	instances []*testenv.MySQLInstance
	phase     func() string // the set's phase now, to attribute each login
	rate      time.Duration // pause between a pod's logins

	mu    sync.Mutex
	pods  map[string]context.CancelFunc
	stats map[string]*counts // by phase
	order []string
	wg    sync.WaitGroup
}

type counts struct{ attempts, failed atomic.Int64 }

func (l *load) record(phase string, ok bool) {
	l.mu.Lock()
	c := l.stats[phase]
	if c == nil {
		c = &counts{}
		l.stats[phase] = c
		l.order = append(l.order, phase)
	}
	l.mu.Unlock()
	c.attempts.Add(1)
	if !ok {
		c.failed.Add(1)
	}
}

// run keeps one client per Ready pod until ctx ends.
func (l *load) run(ctx context.Context) {
	l.pods, l.stats = map[string]context.CancelFunc{}, map[string]*counts{}
	for ctx.Err() == nil {
		var pods corev1.PodList
		if err := l.k8s.List(ctx, &pods, client.InNamespace(l.namespace), client.MatchingLabels(l.selector)); err == nil {
			l.sync(ctx, pods.Items)
		}
		// Often: a pod that terminates must stop logging in before the
		// operator can see its rollout complete and discard (the real
		// process gets SIGTERM at that moment).
		time.Sleep(50 * time.Millisecond)
	}
	l.mu.Lock()
	for _, cancel := range l.pods {
		cancel()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

func (l *load) sync(ctx context.Context, pods []corev1.Pod) {
	live := map[string]bool{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || !ready(&p) {
			continue
		}
		id := string(p.UID)
		live[id] = true
		l.mu.Lock()
		_, running := l.pods[id]
		l.mu.Unlock()
		if running {
			continue
		}
		// The pod starts: it reads the Secret now and never again.
		var s corev1.Secret
		if err := l.k8s.Get(ctx, client.ObjectKey{Namespace: l.namespace, Name: l.secret}, &s); err != nil {
			continue
		}
		password := string(s.Data[l.key])
		pctx, cancel := context.WithCancel(ctx)
		l.mu.Lock()
		l.pods[id] = cancel
		l.mu.Unlock()
		l.wg.Add(1)
		go l.client(pctx, password)
	}
	l.mu.Lock()
	for id, cancel := range l.pods {
		if !live[id] {
			cancel()
			delete(l.pods, id)
		}
	}
	l.mu.Unlock()
}

func (l *load) client(ctx context.Context, password string) {
	defer l.wg.Done()
	for n := 0; ctx.Err() == nil; n++ {
		inst := l.instances[n%len(l.instances)]
		l.record(l.phase(), inst.CanLogin(l.user, password) == nil)
		select {
		case <-ctx.Done():
		case <-time.After(l.rate):
		}
	}
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// summary returns per-phase rows and the total of failed logins.
func (l *load) summary() ([]string, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var rows []string
	var failed int64
	for _, ph := range l.order {
		c := l.stats[ph]
		rows = append(rows, fmt.Sprintf("%-12s %8d %8d", ph, c.attempts.Load(), c.failed.Load()))
		failed += c.failed.Load()
	}
	return rows, failed
}
