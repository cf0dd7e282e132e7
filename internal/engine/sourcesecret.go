package engine

import (
	"sort"
	"strings"
)

// Source Secret layout: current secrets
// under their keys, and during a rotation <key>_PENDING plus ROTATION_ID.
const (
	PendingSuffix = "_PENDING"
	RotationIDKey = "ROTATION_ID"
)

// PendingKey is the source Secret key of key's pending secret.
func PendingKey(key string) string { return key + PendingSuffix }

// AddingSuffix ends the source Secret key of a secret minted for an
// identity added to the spec of a provisioned set: stored before any
// instance learns it, and made current (moved to key) once every instance
// accepts it, so that consumers are never given a secret an instance
// refuses.
const AddingSuffix = "_ADDING"

// AddingKey is the source Secret key of key's secret while it is added.
func AddingKey(key string) string { return key + AddingSuffix }

// PendingState is what the source Secret holds for a rotation.
type PendingState int

const (
	// PendingNone: no pending key and no ROTATION_ID.
	PendingNone PendingState = iota
	// PendingMatch: every pending key, and ROTATION_ID equals the rotation.
	PendingMatch
	// PendingStale: ROTATION_ID belongs to another rotation.
	PendingStale
	// PendingPartial: ROTATION_ID matches (or is missing) but some pending
	// keys are missing.
	PendingPartial
)

func (s PendingState) String() string {
	return [...]string{"None", "Match", "Stale", "Partial"}[s]
}

// InspectPending classifies the source Secret's pending data for rotationID.
func InspectPending(data map[string][]byte, keys []string, rotationID string) PendingState {
	id, hasID := data[RotationIDKey]
	present := 0
	for _, k := range keys {
		if v, ok := data[PendingKey(k)]; ok && len(v) > 0 {
			present++
		}
	}
	switch {
	case !hasID && present == 0:
		return PendingNone
	case hasID && string(id) != rotationID:
		return PendingStale
	case hasID && present == len(keys):
		return PendingMatch
	default:
		return PendingPartial
	}
}

// Current returns the current secrets of keys; missing lists keys without
// a value.
func Current(data map[string][]byte, keys []string) (cur Secrets, missing []string) {
	cur = Secrets{}
	for _, k := range keys {
		if v := data[k]; len(v) > 0 {
			cur[k] = string(v)
		} else {
			missing = append(missing, k)
		}
	}
	return cur, missing
}

// CurrentCount is how many current secrets data holds, of any key (a
// user the spec no longer lists too): every entry but pending and staged
// secrets and ROTATION_ID.
func CurrentCount(data map[string][]byte) int {
	n := 0
	for k, v := range data {
		if len(v) > 0 && k != RotationIDKey && !strings.HasSuffix(k, PendingSuffix) && !strings.HasSuffix(k, AddingSuffix) {
			n++
		}
	}
	return n
}

// Pending returns the pending secrets of keys (only meaningful when
// InspectPending says PendingMatch).
func Pending(data map[string][]byte, keys []string) Secrets {
	p := Secrets{}
	for _, k := range keys {
		if v := data[PendingKey(k)]; len(v) > 0 {
			p[k] = string(v)
		}
	}
	return p
}

// SplitByPending splits keys into those pending holds a secret for and
// the others (a repair with pending secrets for some keys only: a user
// listed again after the rotation that went on without it).
func SplitByPending(keys []string, pending Secrets) (has, lacks []string) {
	for _, k := range keys {
		if pending[k] != "" {
			has = append(has, k)
		} else {
			lacks = append(lacks, k)
		}
	}
	return has, lacks
}

// WithPending returns data plus pending secrets and ROTATION_ID.
func WithPending(data map[string][]byte, pending Secrets, rotationID string) map[string][]byte {
	out := clone(data)
	for k, v := range pending {
		out[PendingKey(k)] = []byte(v)
	}
	out[RotationIDKey] = []byte(rotationID)
	return out
}

// Confirm moves pending secrets into current and drops the rotation keys.
// It is idempotent: with nothing pending it returns data unchanged.
func Confirm(data map[string][]byte, keys []string) map[string][]byte {
	out := clone(data)
	for _, k := range keys {
		if v, ok := out[PendingKey(k)]; ok {
			out[k] = v
			delete(out, PendingKey(k))
		}
	}
	delete(out, RotationIDKey)
	return out
}

// WithoutPending drops pending secrets and ROTATION_ID, keeping current
// (the rollback of an interrupted rotation).
func WithoutPending(data map[string][]byte, keys []string) map[string][]byte {
	out := clone(data)
	for _, k := range keys {
		delete(out, PendingKey(k))
	}
	delete(out, RotationIDKey)
	return out
}

// SortedKeys returns the keys of s in order, for deterministic iteration.
func (s Secrets) SortedKeys() []string {
	ks := make([]string, 0, len(s))
	for k := range s {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func clone(data map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(data))
	for k, v := range data {
		out[k] = v
	}
	return out
}
