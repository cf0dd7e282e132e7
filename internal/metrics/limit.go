package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Default bounds on the sets that get series of their own. Every set adds
// about twenty series; a namespace that may create CredentialSets could
// otherwise grow the scrape (and Prometheus' memory) at will.
const (
	DefaultMaxSets             = 1000
	DefaultMaxSetsPerNamespace = 100
)

// Unlisted is the namespace and name label value that counters of the sets
// over the bound share.
const Unlisted = "_unlisted"

var (
	unlisted = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rekey_credentialsets_unlisted",
		Help: "CredentialSets that have no series of their own because the manager's --metrics-max-sets or --metrics-max-sets-per-namespace was reached; their counters are summed under namespace and name \"_unlisted\".",
	})
	unlistedStuck = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rekey_unlisted_rotations_stuck",
		Help: "Rotations of unlisted CredentialSets active longer than their stuckAfter.",
	})
)

// roster decides which sets get series of their own: the first ones seen,
// up to a total and a per-namespace bound; a deleted set frees its place.
type roster struct {
	mu          sync.Mutex
	max, perNS  int
	listed      map[[2]string]bool
	perNSListed map[string]int
	others      map[[2]string]bool // seen, not listed
	stuck       map[[2]string]bool // unlisted and stuck
}

var sets = newRoster(DefaultMaxSets, DefaultMaxSetsPerNamespace)

func newRoster(max, perNS int) *roster {
	return &roster{max: max, perNS: perNS, listed: map[[2]string]bool{}, perNSListed: map[string]int{},
		others: map[[2]string]bool{}, stuck: map[[2]string]bool{}}
}

// SetLimits sets the bounds (the manager's flags); call it before the
// first set is seen. A bound below 1 means no bound.
func SetLimits(max, perNamespace int) {
	sets.mu.Lock()
	defer sets.mu.Unlock()
	sets.max, sets.perNS = max, perNamespace
}

// listed says whether the set has series of its own, giving it a place if
// one is free.
func (r *roster) list(namespace, name string) bool {
	k := [2]string{namespace, name}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listed[k] {
		return true
	}
	if (r.max < 1 || len(r.listed) < r.max) && (r.perNS < 1 || r.perNSListed[namespace] < r.perNS) {
		r.listed[k] = true
		r.perNSListed[namespace]++
		if r.others[k] {
			delete(r.others, k)
			delete(r.stuck, k)
			r.publish()
		}
		return true
	}
	if !r.others[k] {
		r.others[k] = true
		r.publish()
	}
	return false
}

// setStuck records an unlisted set's stuck state.
func (r *roster) setStuck(namespace, name string, isStuck bool) {
	k := [2]string{namespace, name}
	r.mu.Lock()
	defer r.mu.Unlock()
	if isStuck {
		r.stuck[k] = true
	} else {
		delete(r.stuck, k)
	}
	r.publish()
}

// forget frees a deleted set's place; it reports whether it had one.
func (r *roster) forget(namespace, name string) bool {
	k := [2]string{namespace, name}
	r.mu.Lock()
	defer r.mu.Unlock()
	had := r.listed[k]
	if had {
		delete(r.listed, k)
		if r.perNSListed[namespace]--; r.perNSListed[namespace] == 0 {
			delete(r.perNSListed, namespace)
		}
	}
	delete(r.others, k)
	delete(r.stuck, k)
	r.publish()
	return had
}

func (r *roster) publish() {
	unlisted.Set(float64(len(r.others)))
	unlistedStuck.Set(float64(len(r.stuck)))
}
