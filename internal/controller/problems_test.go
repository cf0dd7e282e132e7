package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// TestClassify: errors a user can act on become the problem that names
// the next step; others go back to controller-runtime's backoff.
func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Group: "rekey.io", Resource: "credentialsets"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "rekey.io", Kind: "CredentialSet"}, "orders",
		field.ErrorList{field.Invalid(field.NewPath("status", "phase"), "x", "denied by policy")})
	for _, c := range []struct {
		name   string
		err    error
		reason reason.Reason // "" for no problem
		says   []string
	}{
		{"unreachable", fmt.Errorf("apply: %w", &engine.UnreachableError{Instance: "db-1", Err: errors.New("connection refused")}),
			reason.InstanceUnreachable, []string{"instance db-1 is unreachable", "resumes by itself", "connection refused"}},
		{"refusal", fmt.Errorf("precheck: %w", &engine.Refusal{Reason: string(reason.DualPasswordExists), Message: "user orders has a second password"}),
			reason.DualPasswordExists, []string{"user orders has a second password"}},
		{"spec", fmt.Errorf("plan: %w", &errSpec{Msg: "spec.mysql is missing"}),
			reason.InvalidSpec, []string{"spec.mysql is missing; fix the CredentialSet spec"}},
		{"rejected write", invalid, reason.WriteRejected, []string{"rejected a write of rekey as invalid", retryNote, "denied by policy"}},
		{"lost race reported invalid", fmt.Errorf("%w: %w", errStale, invalid), "", nil},
		{"conflict", apierrors.NewConflict(gr, "orders", errors.New("modified")), "", nil},
		{"other", errors.New("dial tcp: i/o timeout"), "", nil},
	} {
		p := classify(c.err)
		switch {
		case c.reason == "" && p != nil:
			t.Errorf("%s: problem %+v, want none (backoff)", c.name, *p)
		case c.reason != "" && p == nil:
			t.Errorf("%s: no problem, want %s", c.name, c.reason)
		case c.reason != "" && p.reason != c.reason:
			t.Errorf("%s: reason %s, want %s", c.name, p.reason, c.reason)
		case c.reason != "":
			for _, s := range c.says {
				if !strings.Contains(p.message, s) {
					t.Errorf("%s: message %q does not say %q", c.name, p.message, s)
				}
			}
		}
	}
}

// TestRejectedWriteBounded: the API server's message can be as long as
// the rejected write; the condition it ends up in must stay within the
// server's limit.
func TestRejectedWriteBounded(t *testing.T) {
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "rekey.io", Kind: "CredentialSet"}, "orders",
		field.ErrorList{field.Invalid(field.NewPath("status", "conditions"), "x", strings.Repeat("é", 5000))})
	p := classify(invalid)
	if p == nil || p.reason != reason.WriteRejected {
		t.Fatalf("classify = %+v, want WriteRejected", p)
	}
	if len(p.message) > 2048+len("…") || !utf8.ValidString(p.message) {
		t.Errorf("message of %d bytes (valid UTF-8: %v), want at most 2048 and valid", len(p.message), utf8.ValidString(p.message))
	}
}

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefghij…"},
		{"aé", 2, "a…"}, // the cut falls inside é: the half is dropped
	} {
		if got := truncate(c.in, c.n); got != c.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestIsRace: a lost race or a shutdown is retried from a fresh read
// without a report; a real failure is not one.
func TestIsRace(t *testing.T) {
	gr := schema.GroupResource{Group: "rekey.io", Resource: "credentialsets"}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"stale", context.Background(), fmt.Errorf("status: %w", errStale), true},
		{"conflict", context.Background(), apierrors.NewConflict(gr, "orders", errors.New("modified")), true},
		{"shutdown", cancelled, errors.New("anything"), true},
		{"failure", context.Background(), errors.New("dial tcp: i/o timeout"), false},
		{"not found", context.Background(), apierrors.NewNotFound(gr, "orders"), false},
	} {
		if got := isRace(c.ctx, c.err); got != c.want {
			t.Errorf("%s: isRace = %v, want %v", c.name, got, c.want)
		}
	}
}
