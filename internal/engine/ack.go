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
