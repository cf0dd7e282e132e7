package leader

import (
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestHolds(t *testing.T) {
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	lease := func(holder *string, renewed time.Duration, seconds int32) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "rekey-system", Name: "rekey.io"}}
		l.Spec.HolderIdentity = holder
		if renewed >= 0 {
			l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-renewed)}
		}
		if seconds > 0 {
			l.Spec.LeaseDurationSeconds = ptr.To(seconds)
		}
		return l
	}
	cases := []struct {
		name string
		l    *coordinationv1.Lease
		ok   bool
	}{
		{"ours, renewed a second ago", lease(ptr.To("a"), time.Second, 15), true},
		{"ours, renewal older than the duration", lease(ptr.To("a"), 16*time.Second, 15), false},
		{"ours, expiring this instant", lease(ptr.To("a"), 15*time.Second, 15), false},
		{"another holder", lease(ptr.To("b"), 0, 15), false},
		{"released (no holder)", lease(nil, 0, 15), false},
		{"released (empty holder)", lease(ptr.To(""), 0, 15), false},
		{"never renewed", lease(ptr.To("a"), -1, 15), false},
		{"no duration", lease(ptr.To("a"), 0, 0), false},
	}
	for _, c := range cases {
		err := Holds(c.l, "a", now)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrNotLeader)) {
			t.Errorf("%s: Holds = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

// A later holding has a higher term, whatever the transition count.
func TestTermOf(t *testing.T) {
	at := func(d time.Duration, transitions int32) *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		l.Spec.AcquireTime = &metav1.MicroTime{Time: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC).Add(d)}
		l.Spec.LeaseTransitions = ptr.To(transitions)
		return l
	}
	first, second := TermOf(at(0, 7)), TermOf(at(4*time.Second, 8))
	recreated := TermOf(at(time.Minute, 0)) // the Lease deleted and made anew
	if !(first < second && second < recreated) {
		t.Fatalf("terms %d, %d, %d: want each later holding higher", first, second, recreated)
	}
	if TermOf(&coordinationv1.Lease{}) != 0 {
		t.Fatal("a Lease never acquired has a term")
	}
}
