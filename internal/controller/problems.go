package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// problem is what stopped this reconcile; it becomes the Degraded
// condition and a Warning Event.
type problem struct {
	reason  reason.Reason
	message string
}

// isRace: another writer (or a shutdown) got there first; the next
// reconcile starts from a fresh read, so there is nothing to report.
func isRace(ctx context.Context, err error) bool {
	return errors.Is(err, errStale) || apierrors.IsConflict(err) || ctx.Err() != nil
}

// classify turns errors the user can act on into problems; others are
// returned to controller-runtime for backoff.
func classify(err error) *problem {
	if u, ok := engine.AsUnreachable(err); ok {
		return &problem{reason.InstanceUnreachable, fmt.Sprintf(
			"instance %s is unreachable, so this phase is on hold (nothing is lost; it resumes by itself when the instance answers): %v", u.Instance, u.Err)}
	}
	if rf, ok := engine.AsRefusal(err); ok {
		return &problem{reason.Reason(rf.Reason), rf.Message}
	}
	var se *errSpec
	if errors.As(err, &se) {
		return &problem{reason.InvalidSpec, se.Msg + "; fix the CredentialSet spec"}
	}
	if apierrors.IsInvalid(err) && !errors.Is(err, errStale) {
		// Not a lost race (those are errStale): the API server refused
		// the write itself, and would refuse it again at once.
		return &problem{reason.WriteRejected, truncate(
			"the Kubernetes API server rejected a write of rekey as invalid (a validation failure or an admission policy); nothing was changed by it and "+retryNote+": check admission policies and webhooks that match CredentialSets or Secrets, and report the message if none applies: "+err.Error(), 2048)}
	}
	return nil
}

// truncate bounds a message that ends up in a condition (whose message
// the API server limits): a rejection caused by an oversized message must
// not make the Degraded condition oversized too.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
