package mysql

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"rekey.io/rekey/internal/engine"
)

// Errant transactions. A replica's gtid_executed holding a transaction
// the primary's does not was written on the replica itself (a DBA's
// statement with binary logging on, an old primary's last unacknowledged
// commits). The cluster manager does not count such a replica as healthy:
// MOCO takes it out of the cluster until it is rebuilt, and a switchover
// to it would send its transactions to every other instance or break
// their replication. A rotation started there may have its users rebuilt
// under it; rekey waits instead, as for any other unhealthy topology.
//
// rekey's own statements never create one: they run with sql_log_bin=0,
// and a transaction that is not logged gets no GTID (TestErrantOnRealMySQL
// proves it on a real server).
//
// A replica's transactions of the primary's own server_uuid are never
// errant, whatever the primary's set says (MOCO's rule, and the same on a
// primary whose binary logs were reset). Every other transaction on a
// replica came through the primary, which had it first: so comparing a
// replica's set with a primary's set read after it is exact, and the
// caller re-reads the primary's before it reports one (rereadPrimary).

// gtidSet is a GTID set as MySQL prints it (gtid_executed): for each
// source — a server_uuid, or server_uuid:tag for the tagged GTIDs of
// MySQL 8.3 and later — its transaction numbers as sorted, disjoint
// intervals.
type gtidSet map[string][]interval

type interval struct{ lo, hi uint64 }

// tagPattern is a GTID tag as MySQL accepts it.
var tagPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,31}$`)

// parseGTIDSet reads "uuid:1-5:7,uuid2:tag:1-3" (whitespace, such as the
// newlines gtid_executed has after its commas, is ignored).
func parseGTIDSet(s string) (gtidSet, error) {
	out := gtidSet{}
	for _, part := range strings.Split(s, ",") {
		part = strings.Join(strings.Fields(part), "")
		if part == "" {
			continue
		}
		fields := strings.Split(part, ":")
		uuid := strings.ToLower(fields[0])
		if len(uuid) != 36 || strings.Count(uuid, "-") != 4 {
			return nil, fmt.Errorf("GTID set %q: %q is not a server_uuid", s, fields[0])
		}
		src, numbered := uuid, true
		for _, f := range fields[1:] {
			if f == "" || f[0] < '0' || f[0] > '9' {
				if !tagPattern.MatchString(f) || !numbered {
					return nil, fmt.Errorf("GTID set %q: %q is neither an interval nor a tag", s, f)
				}
				// A tag: the intervals after it are its own.
				src, numbered = uuid+":"+strings.ToLower(f), false
				continue
			}
			numbered = true
			lo, hi, found := strings.Cut(f, "-")
			a, err := strconv.ParseUint(lo, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("GTID set %q: %q is not an interval", s, f)
			}
			b := a
			if found {
				if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
					return nil, fmt.Errorf("GTID set %q: %q is not an interval", s, f)
				}
			}
			out[src] = append(out[src], interval{a, b})
		}
		if !numbered {
			return nil, fmt.Errorf("GTID set %q: a tag without transactions", s)
		}
	}
	for src, ivs := range out {
		out[src] = normalize(ivs)
	}
	return out, nil
}

// normalize sorts intervals and merges those that overlap or touch.
func normalize(ivs []interval) []interval {
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].lo < ivs[j].lo })
	var out []interval
	for _, iv := range ivs {
		if n := len(out); n > 0 && iv.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, iv.hi)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// minus is g without the transactions of o.
func (g gtidSet) minus(o gtidSet) gtidSet {
	out := gtidSet{}
	for src, ivs := range g {
		rest := ivs
		for _, cut := range o[src] {
			var next []interval
			for _, iv := range rest {
				if cut.hi < iv.lo || cut.lo > iv.hi {
					next = append(next, iv)
					continue
				}
				if iv.lo < cut.lo {
					next = append(next, interval{iv.lo, cut.lo - 1})
				}
				if iv.hi > cut.hi {
					next = append(next, interval{cut.hi + 1, iv.hi})
				}
			}
			rest = next
		}
		if len(rest) > 0 {
			out[src] = rest
		}
	}
	return out
}

func (g gtidSet) sources() []string {
	srcs := make([]string, 0, len(g))
	for src := range g {
		srcs = append(srcs, src)
	}
	sort.Strings(srcs)
	return srcs
}

// String prints g as MySQL does, sources in order; at most limit sources
// (0: all), the others counted.
func (g gtidSet) String(limit int) string {
	var parts []string
	srcs := g.sources()
	for i, src := range srcs {
		if limit > 0 && i == limit {
			parts = append(parts, fmt.Sprintf("and transactions of %d more sources", len(srcs)-limit))
			break
		}
		var b strings.Builder
		b.WriteString(src)
		for _, iv := range g[src] {
			if iv.lo == iv.hi {
				fmt.Fprintf(&b, ":%d", iv.lo)
			} else {
				fmt.Fprintf(&b, ":%d-%d", iv.lo, iv.hi)
			}
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, ", ")
}

// first is g's first GTID, as SET GTID_NEXT takes it.
func (g gtidSet) first() string {
	srcs := g.sources()
	if len(srcs) == 0 {
		return ""
	}
	return fmt.Sprintf("%s:%d", srcs[0], g[srcs[0]][0].lo)
}

// withoutSource is g without the transactions of server uuid (any tag).
func (g gtidSet) withoutSource(uuid string) gtidSet {
	out := gtidSet{}
	uuid = strings.ToLower(uuid)
	for src, ivs := range g {
		if u, _, _ := strings.Cut(src, ":"); u != uuid {
			out[src] = ivs
		}
	}
	return out
}

// errantOf is what o executed that primary did not: nil when nothing, or
// when either set cannot be read (a problem reported as such).
func errantOf(primary, o observation) (gtidSet, error) {
	mine, err := parseGTIDSet(o.GTIDExecuted)
	if err != nil {
		return nil, err
	}
	theirs, err := parseGTIDSet(primary.GTIDExecuted)
	if err != nil {
		return nil, err
	}
	diff := mine.minus(theirs).withoutSource(primary.ServerUUID)
	if len(diff) == 0 {
		return nil, nil
	}
	return diff, nil
}

// errantProblems names each instance besides primary that holds errant
// transactions, and what a DBA runs about it. An instance being cloned is
// skipped: its set is the donor's only once the clone completes.
func errantProblems(primary observation, obs []observation) []string {
	var out []string
	for _, o := range obs {
		if o.Name == primary.Name || o.Clone == cloneInProgress {
			continue
		}
		diff, err := errantOf(primary, o)
		if err != nil {
			out = append(out, fmt.Sprintf("rekey cannot compare the executed transactions of %s with those of the primary %s: %v", o.Name, primary.Name, err))
			continue
		}
		if diff == nil {
			continue
		}
		out = append(out, fmt.Sprintf(
			"%s holds transactions the primary %s does not (errant GTIDs %s), written on %s itself: "+
				"rebuild %s from the primary (clone it, or for a MOCO cluster delete its PVC and pod), "+
				"or, if their changes may stay, mark each as executed on the primary with an empty transaction: "+
				"SET GTID_NEXT='%s'; BEGIN; COMMIT; SET GTID_NEXT='AUTOMATIC'; and so on for each GTID listed",
			o.Name, primary.Name, diff.String(3), o.Name, o.Name, diff.first()))
	}
	return out
}

// errantSuspect is the primary's name when some instance holds
// transactions the primary's set, as read, lacks; "" otherwise. The
// primary may have committed them after it was read: its set is read
// again (rereadPrimary) before decideHealth judges.
func errantSuspect(obs []observation) string {
	primary, ok := primaryOf(obs)
	if !ok {
		return ""
	}
	for _, o := range obs {
		if o.Name == primary.Name || o.Clone == cloneInProgress {
			continue
		}
		if diff, err := errantOf(primary, o); err == nil && diff != nil {
			return primary.Name
		}
	}
	return ""
}

// rereadPrimary reads the suspected primary's gtid_executed again, after
// every other instance's was read, and replaces it in obs: a transaction
// a replica received from it is then in it.
func (b *Backend) rereadPrimary(ctx context.Context, obs []observation, passwords []string, secrets engine.Secrets) error {
	name := errantSuspect(obs)
	if name == "" {
		return nil
	}
	var inst Instance
	for _, i := range b.Instances {
		if i.Name == name {
			inst = i
		}
	}
	s, err := openSession(ctx, "health", false, nil, inst, b.transport, b.AdminUser, passwords...)
	if err != nil {
		return safe(b.adminLoginError(err))
	}
	b.bind(s, secrets)
	var set string
	err = s.conn.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_executed").Scan(&set)
	if err != nil {
		err = s.wrap("read gtid_executed", err)
	}
	if cerr := s.close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return safe(err)
	}
	for i := range obs {
		if obs[i].Name == name {
			obs[i].GTIDExecuted = set
		}
	}
	return nil
}
