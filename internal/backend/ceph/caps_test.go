package ceph

import (
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestCapsDiff(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec v1.CephCaps
		have map[string]string
		want string
	}{
		{"equal", v1.CephCaps{Mon: "profile rbd", OSD: "profile rbd pool=rbd"}, map[string]string{"mon": "profile rbd", "osd": "profile rbd pool=rbd"}, ""},
		{"equal but for outer spaces", v1.CephCaps{Mon: " allow r "}, map[string]string{"mon": "allow r"}, ""},
		{"no caps either side", v1.CephCaps{}, nil, ""},
		{"wider in the cluster", v1.CephCaps{Mon: "allow r"}, map[string]string{"mon": "allow rw"}, `has mon caps "allow rw", the spec gives "allow r"`},
		{"missing in the cluster", v1.CephCaps{Mon: "allow r", OSD: "allow rwx"}, map[string]string{"mon": "allow r"}, `has no osd caps, the spec gives "allow rwx"`},
		{"only in the cluster", v1.CephCaps{Mon: "allow r"}, map[string]string{"mon": "allow r", "mds": "allow"}, `has mds caps "allow", the spec gives none`},
		{"a daemon type the spec cannot name", v1.CephCaps{}, map[string]string{"rgw": "allow *"}, `has rgw caps "allow *", the spec gives none`},
		{"several, in daemon order", v1.CephCaps{Mon: "allow r", MGR: "allow r"}, map[string]string{"mon": "profile mgr", "osd": "allow *"},
			`has mon caps "profile mgr", the spec gives "allow r", has osd caps "allow *", the spec gives none, has no mgr caps, the spec gives "allow r"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := capsDiff(tc.spec, tc.have); got != tc.want {
				t.Fatalf("capsDiff = %q, want %q", got, tc.want)
			}
		})
	}
}
