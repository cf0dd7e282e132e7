// Package metrics exposes rekey's Prometheus metrics on the manager's
// metrics endpoint. Labels carry names and phases only: no secret, no
// rotation ID, nothing that grows without bound per rotation.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "rekey.io/rekey/api/v1alpha1"
)

var phases = []string{"Pending", "Idle", "Rotating", "Distributed"}

var (
	phase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rekey_credentialset_phase",
		Help: "1 for the rotation phase the CredentialSet is in, 0 for the others.",
	}, []string{"namespace", "name", "phase"})
	rotations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rekey_rotations_total",
		Help: "Rotations that ended, by result: completed, aborted (rolled back on request), failed (rolled back by a recovery because it could not go on).",
	}, []string{"namespace", "name", "result"})
	refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rekey_refusals_total",
		Help: "Times a phase was refused or held, by reason (each retry counts).",
	}, []string{"namespace", "name", "reason"})
	phaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rekey_phase_duration_seconds",
		Help:    "How long rotations spent in a phase (Rotating: trigger to Distributed; Distributed: to Idle).",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 16), // 0.5 s … ~4.5 h
	}, []string{"phase"})
	lastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rekey_last_successful_rotation_timestamp_seconds",
		Help: "Unix time of the last completed rotation (from the set's status, so a restarted manager serves it again after its first reconcile; absent until a rotation completed).",
	}, []string{"namespace", "name"})
	generation = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rekey_key_generation",
		Help: "The CredentialSet's current keyGeneration.",
	}, []string{"namespace", "name"})
	consumers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rekey_consumers",
		Help: "Consumers (workloads and groups) of a set by state: moved to what the distribution Secrets hold, or waiting.",
	}, []string{"namespace", "name", "state"})
	groupMembers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rekey_group_members",
		Help: "Members of a consumer group by state: acknowledged for the current credentials (moved), or waiting.",
	}, []string{"namespace", "name", "group", "state"})
	stuck = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rekey_rotation_stuck",
		Help: "1 while the set's rotation has been active longer than its stuckAfter (condition RotationStuck), else 0.",
	}, []string{"namespace", "name"})
	failures = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rekey_consecutive_failures",
		Help: "Reconciles of the set in a row that failed (0 once one gets through); the set is retried with a backoff that doubles with each, so the number is kept here rather than in its status or Events.",
	}, []string{"namespace", "name"})
	retirements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rekey_retirements_total",
		Help: "Old credentials retired (discarded, deleted) at the end of a rotation.",
	}, []string{"namespace", "name"})
	age = &ageCollector{since: map[[2]string]time.Time{}, desc: prometheus.NewDesc(
		"rekey_credential_age_seconds", "Age of the current credentials (since they became current).",
		[]string{"namespace", "name"}, nil)}
)

func init() {
	crmetrics.Registry.MustRegister(phase, rotations, refusals, phaseDuration, lastSuccess, generation, age,
		consumers, groupMembers, retirements, stuck, failures, unlisted, unlistedStuck)
}

// Results of a rotation, the values of rekey_rotations_total's result label.
const (
	ResultCompleted = "completed"
	ResultAborted   = "aborted"
	ResultFailed    = "failed"
)

var results = []string{ResultCompleted, ResultAborted, ResultFailed}

// Observe records what a reconcile saw of a set. Every gauge here is
// derived from the set's status, not from what this process did, so a
// restarted manager (or a new leader) serves the same values after its
// first reconcile of the set: a staleness alert neither fires nor goes
// absent because the manager restarted.
func Observe(namespace, name string, st *v1.CredentialSetStatus) {
	if !sets.list(namespace, name) {
		return
	}
	for _, p := range phases {
		v := 0.0
		if p == string(st.Phase) || (st.Phase == "" && p == "Pending") {
			v = 1
		}
		phase.WithLabelValues(namespace, name, p).Set(v)
	}
	generation.WithLabelValues(namespace, name).Set(float64(st.KeyGeneration))
	var since *time.Time
	if st.CurrentSince != nil {
		since = &st.CurrentSince.Time
	}
	age.set(namespace, name, since)
	// currentSince is set when a rotation completes (and at provisioning,
	// when lastRotationID is still empty); a rollback leaves both alone.
	if at, ok := LastSuccess(st); ok {
		lastSuccess.WithLabelValues(namespace, name).Set(float64(at.Unix()))
	}
	// Every result exists from the start, so increase() and rate() see the
	// first rotation that ends in it.
	for _, r := range results {
		rotations.WithLabelValues(namespace, name, r).Add(0)
	}
}

// LastSuccess is when the set's last rotation completed, as its status
// records it; false before any rotation completed.
func LastSuccess(st *v1.CredentialSetStatus) (time.Time, bool) {
	if st.LastRotationID == "" || st.CurrentSince == nil {
		return time.Time{}, false
	}
	return st.CurrentSince.Time, true
}

// Coverage records which consumers moved, and each group's members.
func Coverage(namespace, name string, cs []v1.ConsumerStatus, groups []v1.ConsumerGroup) {
	if !sets.list(namespace, name) {
		return
	}
	moved := 0
	for _, c := range cs {
		if c.RolledOut {
			moved++
		}
	}
	consumers.WithLabelValues(namespace, name, "moved").Set(float64(moved))
	consumers.WithLabelValues(namespace, name, "waiting").Set(float64(len(cs) - moved))
	groupMembers.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	for _, g := range groups {
		acked := 0
		for _, c := range cs {
			if c.Kind == v1.KindGroup && c.Name == g.Name {
				acked = len(c.MembersUpdated)
			}
		}
		groupMembers.WithLabelValues(namespace, name, g.Name, "moved").Set(float64(acked))
		groupMembers.WithLabelValues(namespace, name, g.Name, "waiting").Set(float64(len(g.Members) - acked))
	}
}

// Stuck records whether the set's rotation is stuck.
func Stuck(namespace, name string, isStuck bool) {
	if !sets.list(namespace, name) {
		sets.setStuck(namespace, name, isStuck)
		return
	}
	v := 0.0
	if isStuck {
		v = 1
	}
	stuck.WithLabelValues(namespace, name).Set(v)
}

// Failures records how many reconciles of the set in a row failed.
func Failures(namespace, name string, n int) {
	if !sets.list(namespace, name) {
		return
	}
	failures.WithLabelValues(namespace, name).Set(float64(n))
}

// Retired counts old credentials retired.
func Retired(namespace, name string) {
	namespace, name = counted(namespace, name)
	retirements.WithLabelValues(namespace, name).Inc()
}

// counted is the labels a counter of the set goes under: its own, or the
// unlisted sets' sum.
func counted(namespace, name string) (string, string) {
	if sets.list(namespace, name) {
		return namespace, name
	}
	return Unlisted, Unlisted
}

// Refused counts a refusal or hold.
func Refused(namespace, name, reason string) {
	namespace, name = counted(namespace, name)
	refusals.WithLabelValues(namespace, name, reason).Inc()
}

// PhaseEnded records the time a rotation spent in a phase.
func PhaseEnded(phaseName string, d time.Duration) {
	phaseDuration.WithLabelValues(phaseName).Observe(d.Seconds())
}

// Ended counts a rotation that ended with result (ResultCompleted, …).
func Ended(namespace, name, result string) {
	namespace, name = counted(namespace, name)
	rotations.WithLabelValues(namespace, name, result).Inc()
}

// Forget drops the series of a deleted set, and frees its place for a
// set without series of its own.
func Forget(namespace, name string) {
	if !sets.forget(namespace, name) {
		return
	}
	for _, p := range phases {
		phase.DeleteLabelValues(namespace, name, p)
	}
	rotations.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	refusals.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	lastSuccess.DeleteLabelValues(namespace, name)
	generation.DeleteLabelValues(namespace, name)
	consumers.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	groupMembers.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	retirements.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	stuck.DeleteLabelValues(namespace, name)
	failures.DeleteLabelValues(namespace, name)
	age.set(namespace, name, nil)
}

// ageCollector computes credential age at scrape time, so it grows between
// reconciles.
type ageCollector struct {
	mu    sync.Mutex
	since map[[2]string]time.Time
	desc  *prometheus.Desc
}

func (c *ageCollector) set(namespace, name string, since *time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if since == nil {
		delete(c.since, [2]string{namespace, name})
		return
	}
	c.since[[2]string{namespace, name}] = *since
}

func (c *ageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *ageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for k, t := range c.since {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, now.Sub(t).Seconds(), k[0], k[1])
	}
}
