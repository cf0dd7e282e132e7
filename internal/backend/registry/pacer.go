package registry

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Pacer is another operator that rolls out the StatefulSets it manages at
// its own pace: it holds the partition and lowers it one pod at a time
// while the cluster it serves is healthy. A consumer's partition it holds
// is its health gate at work, not a stalled rollout, and lowering it by
// hand would restart pods past that gate. A backend whose servers such an
// operator runs registers it (RegisterPacer); the controller judges the
// rollouts it paces by the owner's health.
type Pacer struct {
	// Name is the operator in messages ("MOCO").
	Name string
	// Owner names the object whose health gates sts's rollout, and its
	// kind ("MySQLCluster"); name "" when this operator does not pace
	// sts. It reads sts alone, so that it holds without the right to
	// read the owner.
	Owner func(sts *appsv1.StatefulSet) (kind, name string)
	// Health reads the owner's health, live.
	Health func(ctx context.Context, r client.Reader, ns, name string) OwnerHealth
	// Condition names the owner's health condition in messages
	// ("Healthy"); Diagnose is where a person looks for why it is false
	// ("kubectl moco status, ...").
	Condition, Diagnose string
}

// OwnerHealth is what the pacing operator reports of the owner.
type OwnerHealth struct {
	// Known: the condition was read (false: no right to read the owner,
	// or the operator has not written it yet).
	Known, Healthy bool
	Reason         string
	Since          time.Time
}

var (
	pacersMu sync.RWMutex
	pacers   []Pacer
)

// RegisterPacer adds an operator that paces rollouts.
func RegisterPacer(p Pacer) {
	pacersMu.Lock()
	defer pacersMu.Unlock()
	pacers = append(pacers, p)
}

// PacerOf is the registered operator that paces sts's rollout, and the
// owner whose health gates it; false when none does.
func PacerOf(sts *appsv1.StatefulSet) (p Pacer, kind, name string, ok bool) {
	pacersMu.RLock()
	defer pacersMu.RUnlock()
	for _, p := range pacers {
		if kind, name := p.Owner(sts); name != "" {
			return p, kind, name, true
		}
	}
	return Pacer{}, "", "", false
}
