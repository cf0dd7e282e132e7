package ceph

import (
	"context"
	"fmt"
)

// unusedKeys are the bootstrap entities Ceph creates and nothing uses, the
// only ones RemoveUnusedKeys deletes: the CRD
// enforces the same list, this guards callers that bypass it.
var unusedKeys = map[string]bool{
	"client.bootstrap-rgw": true,
	"client.bootstrap-rbd": true,
	"client.bootstrap-mgr": true,
	"client.bootstrap-mds": true,
}

// RemoveUnusedKeys deletes those of names that exist and returns them;
// deleting them rather than rotating them is what the Ceph team advises.
// Running it again removes nothing. The caller announces what was removed
// (it is not sent to Report).
func (b *Backend) RemoveUnusedKeys(ctx context.Context, names []string) (removed []string, err error) {
	for _, n := range names {
		if !unusedKeys[n] {
			return nil, fmt.Errorf("%s is not one of the unused bootstrap keys rekey may delete", n)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	s, err := b.open(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	dump, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := dump[n]; !ok {
			continue
		}
		if err := s.remove(ctx, n); err != nil {
			return removed, err
		}
		removed = append(removed, n)
	}
	return removed, nil
}
