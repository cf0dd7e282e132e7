package engine

import (
	"slices"
	"strings"
)

// AckAnnotationPrefix + a consumer group's name carries that group's
// acknowledgements, "<secretHash>:<member>,<member>" (kubectl rekey ack
// writes it). It accumulates batches for one hash; an ack for another hash
// replaces it, and the operator ignores acks for a hash that is not the
// one the distribution Secrets hold.
const AckAnnotationPrefix = "rekey.io/ack."

// ParseAck splits an acknowledgement annotation value.
func ParseAck(v string) (hash string, members []string, ok bool) {
	hash, list, ok := strings.Cut(v, ":")
	if !ok || hash == "" {
		return "", nil, false
	}
	for _, m := range strings.Split(list, ",") {
		if m = strings.TrimSpace(m); m != "" && !slices.Contains(members, m) {
			members = append(members, m)
		}
	}
	return hash, members, true
}

// MergeAck is the annotation value after acknowledging members for hash on
// top of the existing value: batches for the same hash accumulate, a new
// hash starts over.
func MergeAck(existing, hash string, members []string) string {
	var all []string
	if h, prev, ok := ParseAck(existing); ok && h == hash {
		all = prev
	}
	for _, m := range members {
		if !slices.Contains(all, m) {
			all = append(all, m)
		}
	}
	slices.Sort(all)
	return hash + ":" + strings.Join(all, ",")
}

// AckVerdict is what the operator makes of an acknowledgement annotation.
type AckVerdict int

const (
	// AckCounts: for the distribution the Secrets hold now; its members
	// count toward the group's coverage.
	AckCounts AckVerdict = iota
	// AckSuperseded: for an earlier distribution of this set — the last
	// valid ack left on the set when the next rotation changed the hash.
	// Expected on every rotation of a set with consumer groups: removed
	// without a Warning.
	AckSuperseded
	// AckMalformed: not "<secretHash>:<member>,...": removed, with a
	// Warning (a person wrote it wrong).
	AckMalformed
	// AckUnknownHash: a hash this set never distributed (another set's, a
	// typo): removed, with a Warning.
	AckUnknownHash
)

// JudgeAck decides what an acknowledgement annotation value v means when
// the distribution Secrets hold current and earlier lists the hashes this
// set distributed before (those it can still name). Only a wrong ack is a
// mistake worth a Warning; one for an earlier distribution is merely stale.
func JudgeAck(v, current string, earlier []string) (AckVerdict, string, []string) {
	hash, members, ok := ParseAck(v)
	switch {
	case !ok:
		return AckMalformed, "", nil
	case hash == current:
		return AckCounts, hash, members
	case slices.Contains(earlier, hash):
		return AckSuperseded, hash, members
	default:
		return AckUnknownHash, hash, members
	}
}
