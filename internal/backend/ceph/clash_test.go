package ceph

import (
	"errors"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// Two sets on one cluster clash when they name the same entity, or one
// names a generation of the other's Overlapping entity; sets on other
// clusters never do.
func TestClash(t *testing.T) {
	spec := func(strategy v1.CephStrategy, monitors []string, names ...string) *v1.CephSpec {
		s := &v1.CephSpec{Monitors: monitors, Strategy: strategy}
		for _, n := range names {
			s.Entities = append(s.Entities, v1.CephEntity{Name: n})
		}
		return s
	}
	here := []string{"v2:10.0.0.1:3300"}
	for _, tc := range []struct {
		name string
		a, b *v1.CephSpec
		want string // "" for no clash, else a part of the description
	}{
		{"same entity", spec(v1.CephInPlace, here, "mgr.a", "client.rgw"), spec(v1.CephInPlace, here, "client.rgw"), "client.rgw"},
		{"same entity, other strategies", spec(v1.CephOverlapping, here, "client.csi"), spec(v1.CephInPlace, here, "client.csi"), "client.csi"},
		{"other entities", spec(v1.CephInPlace, here, "client.a"), spec(v1.CephInPlace, here, "client.b"), ""},
		{"a generation of the other's Overlapping entity", spec(v1.CephOverlapping, here, "client.csi"), spec(v1.CephInPlace, here, "client.csi.2"), "generation 2 of client.csi"},
		{"its Overlapping generation is the other's entity", spec(v1.CephInPlace, here, "client.csi.4"), spec(v1.CephOverlapping, here, "client.csi"), "generation 4 is client.csi.4"},
		{"a dotted name that is not a generation", spec(v1.CephOverlapping, here, "client.csi"), spec(v1.CephInPlace, here, "client.csi.rbd"), ""},
		{"generation-like name without Overlapping", spec(v1.CephInPlace, here, "client.csi"), spec(v1.CephInPlace, here, "client.csi.2"), ""},
		{"another cluster", spec(v1.CephInPlace, here, "client.rgw"), spec(v1.CephInPlace, []string{"v2:10.0.0.2:3300"}, "client.rgw"), ""},
		{"the same mon written without prefix and port", spec(v1.CephInPlace, here, "client.rgw"), spec(v1.CephInPlace, []string{"10.0.0.1"}, "client.rgw"), "client.rgw"},
		{"another cluster on the same host", spec(v1.CephInPlace, []string{"v2:127.0.0.1:40001"}, "client.rgw"), spec(v1.CephInPlace, []string{"v2:127.0.0.1:40002"}, "client.rgw"), ""},
	} {
		got := Clash(tc.a, tc.b)
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: Clash = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestAdminClash: a set that rotates the entity another set on the same
// cluster runs its commands as would kill that set's admin keyring.
func TestAdminClash(t *testing.T) {
	here, there := []string{"v2:10.0.0.1:3300"}, []string{"v2:10.0.0.2:3300"}
	spec := func(monitors []string, admin string, names ...string) *v1.CephSpec {
		s := &v1.CephSpec{Monitors: monitors, Admin: v1.CephAdmin{Entity: admin}}
		for _, n := range names {
			s.Entities = append(s.Entities, v1.CephEntity{Name: n})
		}
		return s
	}
	for _, tc := range []struct {
		name string
		a, b *v1.CephSpec
		want string // "" for no clash, else a part of the description
	}{
		{"b rotates a's admin (the default client.admin)", spec(here, "", "client.csi"), spec(here, "client.ops", "client.admin"), "Remove client.admin from spec.ceph.entities"},
		{"a rotates b's admin", spec(here, "client.ops", "client.admin"), spec(here, "", "client.csi"), "Use another admin entity"},
		{"a rotates its own admin, which b runs as too", spec(here, "", "client.admin"), spec(here, "", "client.b"), "Use another admin entity"},
		{"each rotates its own admin only", spec(here, "", "client.admin"), spec(here, "client.ops", "client.ops"), ""},
		{"both run as one admin, neither rotates it", spec(here, "", "client.a"), spec(here, "", "client.b"), ""},
		{"a rotates its own admin, b runs as another", spec(here, "", "client.admin"), spec(here, "client.ops", "client.b"), ""},
		{"another cluster", spec(here, "", "client.csi"), spec(there, "client.ops", "client.admin"), ""},
	} {
		got := AdminClash(tc.a, tc.b)
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: AdminClash = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSameCluster(t *testing.T) {
	for _, tc := range []struct {
		a, b []string
		want bool
	}{
		{[]string{"v2:10.0.0.1:3300"}, []string{"10.0.0.1:3300"}, true},
		{[]string{"v2:10.0.0.1"}, []string{"10.0.0.1:3300"}, true},
		{[]string{"v1:10.0.0.1"}, []string{"10.0.0.1:6789"}, true},
		{[]string{"v1:10.0.0.1"}, []string{"v2:10.0.0.1"}, false}, // msgr1 and msgr2 ports of one host: unknown, not assumed
		{[]string{"10.0.0.1"}, []string{"v1:10.0.0.1:6789"}, true},
		{[]string{"MON-A.example"}, []string{"mon-a.example:3300"}, true},
		{[]string{"[::1]:3300"}, []string{"v2:[::1]"}, true},
		{[]string{"v2:10.0.0.1:3300", "v2:10.0.0.2:3300"}, []string{"v2:10.0.0.2:3300"}, true},
		{[]string{"v2:10.0.0.1:3300"}, []string{"v2:10.0.0.1:3301"}, false},
	} {
		if got := SameCluster(tc.a, tc.b); got != tc.want {
			t.Errorf("SameCluster(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestAdminError: the admin's key refused is AuthenticationFailed naming
// the entity, the monitors and the Secret key, never "unreachable"; its
// caps refusing a command is PermissionDenied; rekey's own decisions still
// see ErrAuthFailed and ErrDenied; anything else passes unchanged.
func TestAdminError(t *testing.T) {
	b := &Backend{monitors: []string{"v2:10.0.0.1:3300"}, adminRef: v1.SecretKeyRef{Name: "ceph-admin", Key: "keyring"}}
	for _, tc := range []struct {
		name   string
		err    error
		reason reason.Reason
		is     error
		says   []string
	}{
		{"key refused", &CommandError{Command: "auth ls", As: "client.admin", kind: ErrAuthFailed}, reason.AuthenticationFailed, ErrAuthFailed,
			[]string{"refused the key of client.admin", "Secret ceph-admin key keyring", "v2:10.0.0.1:3300", "ceph auth get client.admin", "nothing was changed"}},
		{"caps refuse", &CommandError{Command: "auth get client.x", As: "client.admin", kind: ErrDenied}, reason.PermissionDenied, ErrDenied,
			[]string{"ceph auth get client.x", "EACCES", "caps"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := b.adminError("client.admin", tc.err)
			rf, ok := engine.AsRefusal(err)
			if !ok || rf.Reason != string(tc.reason) || !errors.Is(err, tc.is) {
				t.Fatalf("adminError = %v, want a %s refusal that is %v", err, tc.reason, tc.is)
			}
			if _, ok := engine.AsUnreachable(err); ok {
				t.Fatal("a refused admin is not an unreachable monitor")
			}
			for _, w := range tc.says {
				if !strings.Contains(rf.Message, w) {
					t.Errorf("%q does not say %q", rf.Message, w)
				}
			}
		})
	}
	other := &CommandError{Command: "auth get client.x", kind: ErrNotFound}
	if got := b.adminError("client.admin", other); got != other {
		t.Fatalf("adminError changed %v into %v", other, got)
	}
}
