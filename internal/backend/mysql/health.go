package mysql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// The health gate: a phase that changes users on every instance
// does not start while the cluster is not healthy. Reachability alone is
// not enough: a replica whose replication stopped, one that is being
// CLONEd, or one that replicates from somewhere other than the primary may
// be rebuilt, re-cloned or re-pointed by the cluster manager in the middle
// of the phase, and comes back with mysql.user rows from another moment.
// rekey waits instead; the controller turns the refusal into a Warning
// Event and the Degraded condition and asks again, so the phase starts by
// itself once the cluster is healthy.
//
// Observing is separate from deciding: observe reads what one instance
// says of itself, decideHealth (pure, table-tested) judges the set.

// decideHealth judges a set of instances, all of which answered: nil when
// a phase may start, else the refusal naming every problem found. phase is
// what would start ("the rotation", "the discard").
//
// Healthy means: no CLONE in progress; every replication channel has both
// threads running; exactly one primary — the one writable instance, or,
// when none is writable, an intermediate primary (the one instance that
// replicates from no other member, but from a server outside the set);
// and every other instance replicates directly from that primary. A
// read-only primary that replicates from nothing is a switchover or
// failover under way: rekey waits for the roles to settle.
func decideHealth(phase string, obs []observation) *engine.Refusal {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	byUUID := map[string]string{}
	for _, o := range obs {
		if other, dup := byUUID[o.ServerUUID]; dup && o.ServerUUID != "" {
			add("%s and %s are the same server (server_uuid %s): list each instance once", other, o.Name, o.ServerUUID)
		}
		byUUID[o.ServerUUID] = o.Name
	}
	broken := map[string]bool{} // instances whose replication is already reported
	for _, o := range obs {
		if o.Clone == cloneInProgress {
			add("a CLONE is in progress on %s", o.Name)
			broken[o.Name] = true
		}
		for _, c := range o.Channels {
			if leftover(o, c) {
				continue
			}
			if p := threadProblem(c); p != "" {
				add("on %s, %s", o.Name, p)
				broken[o.Name] = true
			}
		}
	}
	if len(obs) > 1 {
		primary, probs := topologyProblems(obs, byUUID, broken)
		problems = append(problems, probs...)
		if primary != nil {
			problems = append(problems, errantProblems(*primary, obs)...)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return &engine.Refusal{Reason: string(reason.ClusterUnhealthy), Message: fmt.Sprintf(
		"%s does not start while the cluster is unhealthy: %s. Nothing was changed. rekey checks again by itself and starts once every replica replicates from the primary with both replication threads running and holds no transaction the primary lacks, and no clone is in progress: fix what is named here (e.g. START REPLICA on a stopped replica) or let the cluster manager do it; nothing needs to be done on rekey's side",
		phase, strings.Join(problems, "; "))}
}

// leftover: a channel with both threads stopped and no error on a
// writable instance. A switchover leaves one on the new primary: MOCO
// makes it writable with STOP REPLICA and RESET REPLICA, which keeps the
// channel's connection settings (only RESET REPLICA ALL removes it).
// Nothing replicates through it and no cluster manager re-points its
// primary, so it is no reason to wait. A second writable instance, or a
// read-only one that replicates from nothing, is still refused by
// topologyProblems.
func leftover(o observation, c channel) bool {
	stopped := func(s string) bool { return s == "No" || s == "" }
	clean := func(errno string) bool { return errno == "" || errno == "0" }
	return !o.ReadOnly && stopped(c.IORunning) && stopped(c.SQLRunning) && clean(c.IOErrno) && clean(c.SQLErrno)
}

// threadProblem describes a channel whose IO or SQL thread is not running.
func threadProblem(c channel) string {
	name := "replication"
	if c.Name != "" {
		name = "replication channel " + c.Name
	}
	var p []string
	if c.IORunning != "Yes" {
		p = append(p, "IO thread is "+threadState(c.IORunning)+lastError(c.IOErrno, c.IOError))
	}
	if c.SQLRunning != "Yes" {
		p = append(p, "SQL thread is "+threadState(c.SQLRunning)+lastError(c.SQLErrno, c.SQLError))
	}
	if len(p) == 0 {
		return ""
	}
	return fmt.Sprintf("%s from %s: %s", name, c.Source, strings.Join(p, ", "))
}

func threadState(s string) string {
	switch s {
	case "No", "":
		return "stopped"
	case "Connecting":
		return "still connecting"
	}
	return strings.ToLower(s)
}

// lastError names MySQL's last replication error by its number and
// rekey's words for it. The message itself is never quoted: it names the
// source's host and replication user as the server saw them, and an
// applier error quotes the failing statement, which can carry another
// application's credentials.
func lastError(errno, _ string) string {
	if errno == "" || errno == "0" {
		return ""
	}
	n, err := strconv.ParseUint(errno, 10, 16)
	if err != nil {
		return " (an error rekey cannot read)"
	}
	if text, ok := replicationErrors[uint16(n)]; ok {
		return fmt.Sprintf(" (error %d: %s)", n, text)
	}
	if known, ok := mysqlErrors[uint16(n)]; ok {
		return fmt.Sprintf(" (error %d: %s)", n, known.text)
	}
	return fmt.Sprintf(" (error %d)", n)
}

// replicationErrors are rekey's words for the errors a replica's threads
// stop on most.
var replicationErrors = map[uint16]string{
	1032:  "a row the source changed is missing here",
	1045:  "the source refused the replication user's password",
	1062:  "a row the source added exists here already",
	1236:  "the source could not send the binary log the replica needs",
	2003:  "cannot connect to the source",
	2005:  "the source's host name does not resolve",
	2061:  "the source requires a secure connection or its public key for the replication user",
	13114: "the source could not send the binary log the replica needs",
}

// topologyProblems finds the primary (nil when there is none to find)
// and checks that every other instance replicates from it. Instances
// whose replication is already reported broken are not reported twice.
func topologyProblems(obs []observation, byUUID map[string]string, broken map[string]bool) (*observation, []string) {
	primary, problem := findPrimary(obs, byUUID)
	if problem != "" {
		return nil, []string{problem}
	}
	var out []string
	for _, c := range primary.Channels {
		if leftover(primary, c) {
			continue
		}
		if n, ok := byUUID[c.SourceUUID]; ok && c.SourceUUID != "" {
			out = append(out, fmt.Sprintf("the primary %s replicates from %s", primary.Name, n))
		}
	}
	for _, o := range obs {
		if o.Name == primary.Name || broken[o.Name] {
			continue
		}
		if replicatesFrom(o, primary.ServerUUID) {
			continue
		}
		switch {
		case len(o.Channels) == 0:
			out = append(out, fmt.Sprintf("%s is not a replica of the primary %s (it replicates from nothing)", o.Name, primary.Name))
		default:
			var from []string
			for _, c := range o.Channels {
				if n, ok := byUUID[c.SourceUUID]; ok {
					from = append(from, n)
				} else if c.SourceUUID == "" {
					// Its IO thread runs but has not yet said which server it reached.
					from = append(from, c.Source+" (just connected, not identified yet)")
				} else {
					from = append(from, c.Source+" (not an instance of this set)")
				}
			}
			out = append(out, fmt.Sprintf("%s replicates from %s, not from the primary %s", o.Name, strings.Join(from, ", "), primary.Name))
		}
	}
	return &primary, out
}

// findPrimary is the one writable instance or, when none is writable, an
// intermediate primary; else the problem that leaves the set without one.
func findPrimary(obs []observation, byUUID map[string]string) (observation, string) {
	var writable, roots []observation
	for _, o := range obs {
		if !o.ReadOnly {
			writable = append(writable, o)
		}
		if !replicatesFromMember(o, byUUID) {
			roots = append(roots, o)
		}
	}
	switch {
	case len(writable) > 1:
		return observation{}, fmt.Sprintf("%s are all writable (read_only=OFF): only the primary may be", names(writable))
	case len(writable) == 1:
		return writable[0], ""
	case len(roots) == 1 && len(roots[0].Channels) == 0:
		// The others replicate from it, yet it takes no writes: the first
		// step of a switchover (the cluster manager made the primary
		// super_read_only and waits for a replica to catch up before it
		// promotes one), a failover, or a primary not made writable yet.
		// Starting now would lift super_read_only on the instance being
		// demoted; the roles settle within seconds.
		return observation{}, fmt.Sprintf("no instance is writable: %s, which the others replicate from, is read-only, as during a switchover or failover; rekey waits until one primary is writable", roots[0].Name)
	case len(roots) == 1:
		// An intermediate primary: it replicates from outside the set.
		return roots[0], ""
	default:
		return observation{}, fmt.Sprintf("no instance is the primary: none is writable and %s replicate from no other instance of the set", names(roots))
	}
}

// primaryOf is the set's primary as findPrimary finds it, if there is one.
func primaryOf(obs []observation) (observation, bool) {
	byUUID := map[string]string{}
	for _, o := range obs {
		byUUID[o.ServerUUID] = o.Name
	}
	p, problem := findPrimary(obs, byUUID)
	return p, problem == "" && len(obs) > 1
}

func replicatesFrom(o observation, uuid string) bool {
	for _, c := range o.Channels {
		if c.SourceUUID != "" && c.SourceUUID == uuid {
			return true
		}
	}
	return false
}

func replicatesFromMember(o observation, byUUID map[string]string) bool {
	for _, c := range o.Channels {
		if n, ok := byUUID[c.SourceUUID]; ok && c.SourceUUID != "" && n != o.Name {
			return true
		}
	}
	return false
}

func names(obs []observation) string {
	var n []string
	for _, o := range obs {
		n = append(n, o.Name)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// healthGate observes every instance over a session that changes nothing
// (super_read_only stays as it is) and refuses when decideHealth does. An
// instance that does not answer is reported as unreachable, as every
// phase does.
func (b *Backend) healthGate(ctx context.Context, phase string, passwords []string, secrets engine.Secrets) error {
	obs, err := b.observeAll(ctx, "health/instance-observed", passwords, secrets, nil)
	if err != nil {
		return err
	}
	if err := b.rereadPrimary(ctx, obs, passwords, secrets); err != nil {
		return err
	}
	if rf := decideHealth(phase, obs); rf != nil {
		return redactRefusal(rf, passwords, secrets)
	}
	if b.Gate != nil {
		return b.Gate(ctx, phase == discardPhase)
	}
	return nil
}

var _ engine.DiscardGate = (*Backend)(nil)

// CheckDiscardHealth is the discard's health gate on its own (Retire runs
// it too), for a caller that records that a discard started — after which
// the rotation can only complete — and so must not record it while the
// cluster is unhealthy: until then, the rotation may still be rolled back.
func (b *Backend) CheckDiscardHealth(ctx context.Context, cur, pending engine.Secrets) error {
	return b.healthGate(ctx, discardPhase, b.adminPasswords(pending, cur), merge(cur, pending))
}

// What the health gate's refusals say does not start.
const (
	rotationPhase = "the rotation"
	discardPhase  = "the discard of the old passwords"
)

// observeAll observes every instance in a read-only session; then, if fn
// is set, runs it in the same session.
func (b *Backend) observeAll(ctx context.Context, step string, passwords []string, secrets engine.Secrets, fn func(*session) error) ([]observation, error) {
	var (
		mu  sync.Mutex
		obs []observation
	)
	err := b.forEachInstance(ctx, step, false, passwords, secrets, func(s *session) error {
		o, err := observe(ctx, s.inst.Name, s.conn)
		if err != nil {
			return s.wrap("observe", err)
		}
		mu.Lock()
		obs = append(obs, o)
		mu.Unlock()
		if fn != nil {
			return fn(s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Instances in the spec's order, whatever order they answered in: the
	// message names them the same way every time.
	order := map[string]int{}
	for i, inst := range b.Instances {
		order[inst.Name] = i
	}
	sort.Slice(obs, func(i, j int) bool { return order[obs[i].Name] < order[obs[j].Name] })
	return obs, nil
}

// redactRefusal keeps secrets out of a refusal that quotes MySQL (its last
// replication errors): rekey's own statements never reach a binary log,
// but nothing is left to that.
func redactRefusal(rf *engine.Refusal, passwords []string, secrets engine.Secrets) *engine.Refusal {
	if err := redact(errors.New(rf.Message), slices.Concat(passwords, values(secrets))...); err != nil {
		rf.Message = err.Error()
	}
	return rf
}
