package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// TestCarry: the bootstrap Secrets a reconcile read reach only the
// reconcile of the set version that reconcile wrote last, once.
func TestCarry(t *testing.T) {
	set := types.NamespacedName{Namespace: "app", Name: "db"}
	admin := types.NamespacedName{Namespace: "app", Name: "admin"}
	memo := func() map[types.NamespacedName]*corev1.Secret {
		return map[types.NamespacedName]*corev1.Secret{admin: {Data: map[string][]byte{"password": []byte("x")}}}
	}
	at := func(rv string) *v1.CredentialSet {
		return &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: set.Namespace, Name: set.Name, ResourceVersion: rv}}
	}
	// moved is the set as a step's status write leaves it: its event wakes
	// the set; reported is a write of conditions alone: it wakes nothing.
	moved := func(rv string) *v1.CredentialSet {
		cs := at(rv)
		cs.Status.Phase = v1.PhaseDistributed
		return cs
	}
	reported := func(rv string) *v1.CredentialSet {
		cs := at(rv)
		cs.Status.Conditions = []metav1.Condition{{Type: "Degraded", Status: metav1.ConditionTrue}}
		return cs
	}
	for _, tc := range []struct {
		name      string
		cache     bool              // a manager wired with its cache
		written   *v1.CredentialSet // rekey's last write of the set (nil: none kept)
		readRV    string            // the version the carrying reconcile read
		succeeded bool              // the carrying reconcile's outcome
		memo      map[types.NamespacedName]*corev1.Secret
		nextRV    string // the version the next reconcile reads
		wantTake  bool
	}{
		{"the write's own event", true, moved("12"), "10", true, memo(), "12", true},
		{"changed by someone since the write", true, moved("12"), "10", true, memo(), "13", false},
		{"the reconcile failed", true, moved("12"), "10", false, memo(), "12", false},
		{"only conditions written: no event wakes it", true, reported("12"), "10", true, memo(), "12", false},
		{"the reconcile wrote nothing", true, at("10"), "10", true, memo(), "10", false},
		{"no write kept", true, nil, "10", true, memo(), "10", false},
		{"nothing read", true, moved("12"), "10", true, map[types.NamespacedName]*corev1.Secret{}, "12", false},
		{"no cache: every read live", false, moved("12"), "10", true, memo(), "12", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &freshReads{}
			if tc.cache {
				f.cache = setCache{&v1.CredentialSet{}}
			}
			if tc.written != nil {
				f.copies = map[freshKey]client.Object{keyOf(tc.written): tc.written}
			}
			f.carry(at(tc.readRV), tc.succeeded, tc.memo)
			got := f.takeCarried(at(tc.nextRV))
			if (got[admin] != nil) != tc.wantTake {
				t.Fatalf("carried to the reconcile of version %s: %v, want %v", tc.nextRV, got != nil, tc.wantTake)
			}
			if again := f.takeCarried(at(tc.nextRV)); again != nil {
				t.Fatal("taken a second time")
			}
		})
	}
	// A set that is gone leaves nothing behind.
	f := &freshReads{cache: setCache{&v1.CredentialSet{}}, copies: map[freshKey]client.Object{keyOf(at("12")): moved("12")}}
	f.carry(at("10"), true, memo())
	if len(f.carried) != 1 {
		t.Fatal("nothing kept for the write's own event")
	}
	f.forgetCarried(set)
	if len(f.carried) != 0 {
		t.Fatal("kept for a set that is gone")
	}
}
