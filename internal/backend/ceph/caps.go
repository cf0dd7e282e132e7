package ceph

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
)

// CapsDrift lists, for each entity whose current key's entity in the
// cluster has caps other than the spec's, how they differ. rekey gives the
// spec's caps only to the entities it creates; it never changes an existing
// entity's caps (an adopted daemon's caps are its owner's, and widening
// them from a spec would hand a tenant more than it had), so a difference
// is reported for a person to settle. An entity missing from the cluster
// is not drift: the next phase refuses it by name.
func (b *Backend) CapsDrift(ctx context.Context, cur engine.Secrets) ([]string, error) {
	s, err := b.open(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	dump, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range b.entities {
		kr, _, err := b.keyringOf(cur, e.Name, "current")
		if err != nil {
			return nil, err
		}
		if entry, ok := dump[kr.Entity]; ok {
			if d := capsDiff(e.Caps, entry.Caps); d != "" {
				out = append(out, kr.Entity+" "+d)
			}
		}
	}
	return out, nil
}

// capsDiff says how the caps an entity has differ from the spec's, per
// daemon type; "" when they are equal. Caps are not secret.
func capsDiff(spec v1.CephCaps, have map[string]string) string {
	want := map[string]string{"mon": spec.Mon, "osd": spec.OSD, "mgr": spec.MGR, "mds": spec.MDS}
	daemons := []string{"mon", "osd", "mgr", "mds"}
	for d := range have {
		if !slices.Contains(daemons, d) {
			daemons = append(daemons, d)
		}
	}
	var diffs []string
	for _, d := range daemons {
		w, h := strings.TrimSpace(want[d]), strings.TrimSpace(have[d])
		if w == h {
			continue
		}
		switch {
		case h == "":
			diffs = append(diffs, fmt.Sprintf("has no %s caps, the spec gives %q", d, w))
		case w == "":
			diffs = append(diffs, fmt.Sprintf("has %s caps %q, the spec gives none", d, h))
		default:
			diffs = append(diffs, fmt.Sprintf("has %s caps %q, the spec gives %q", d, h, w))
		}
	}
	return strings.Join(diffs, ", ")
}
