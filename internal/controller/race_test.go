package controller

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"rekey.io/rekey/internal/reason"
)

// TestRaceOrRejection: only the 422 of a failed JSON Patch "test" op (what
// the API server answers when casStatus or dropAnnotations lost a race) is
// a race; any other 422 — a validation failure, an admission policy — is
// a WriteRejected problem (a Warning and Degraded, retried after 10 s),
// never retried silently every 100 ms. The errors are the values
// apimachinery builds on the server (patch.go's NewGenericServerResponse
// for a failed test op, NewInvalid for a schema validation).
func TestRaceOrRejection(t *testing.T) {
	gk := schema.GroupKind{Group: "rekey.io", Kind: "CredentialSet"}
	// patch.go answers a patch that does not apply exactly so.
	testOp := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "",
		"testing value /status/phase failed: test failed", 0, false)
	missing := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "",
		"testing value /metadata/annotations/rekey.io~1discard failed: test failed", 0, false)
	oversized := apierrors.NewInvalid(gk, "cs", field.ErrorList{field.TooLong(field.NewPath("status", "conditions").Index(3).Child("message"), "", 32768)})
	// The validating admission policy dispatcher: NewForbidden with the
	// policy's reason (Invalid) and its message as a cause.
	policy := apierrors.NewForbidden(schema.GroupResource{Group: "rekey.io", Resource: "credentialsets"}, "cs", fmt.Errorf("ValidatingAdmissionPolicy 'x' denied request"))
	policy.ErrStatus.Reason, policy.ErrStatus.Code = "Invalid", http.StatusUnprocessableEntity
	policy.ErrStatus.Details.Causes = append(policy.ErrStatus.Details.Causes, metav1.StatusCause{Message: "ValidatingAdmissionPolicy 'x' denied request"})
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "rekey.io", Resource: "credentialsets"}, "cs", fmt.Errorf("the object has been modified"))
	ctx := context.Background()

	for _, c := range []struct {
		name     string
		err      error
		testOp   bool
		race     bool
		rejected bool
	}{
		{"failed test op on the status (casStatus)", testOp, true, true, false},
		{"failed test op on an annotation (dropAnnotations)", missing, true, true, false},
		{"oversized condition message", oversized, false, false, true},
		{"admission policy", policy, false, false, true},
		{"conflict", conflict, false, true, false},
	} {
		if got := testOpFailed(c.err); got != c.testOp {
			t.Errorf("%s: testOpFailed = %v", c.name, got)
		}
		// What casStatus returns for it.
		wrapped := c.err
		if testOpFailed(c.err) || apierrors.IsConflict(c.err) {
			wrapped = fmt.Errorf("%w: cs left phase Idle: %v", errStale, c.err)
		}
		if got := isRace(ctx, wrapped); got != c.race {
			t.Errorf("%s: isRace = %v", c.name, got)
		}
		prob := classify(wrapped)
		if c.rejected != (prob != nil && prob.reason == reason.WriteRejected) {
			t.Errorf("%s: classify = %+v", c.name, prob)
		}
		if prob != nil && !strings.Contains(prob.message, c.err.Error()) {
			t.Errorf("%s: the problem does not carry the server's message: %s", c.name, prob.message)
		}
	}
	long := apierrors.NewInvalid(gk, "cs", field.ErrorList{field.TooLong(field.NewPath("status", "conditions").Index(3).Child("message"), strings.Repeat("x", 40000), 32768)})
	if prob := classify(long); prob == nil || len(prob.message) > 4096 {
		t.Errorf("a rejection of an oversized message must yield a bounded one: %d", len(prob.message))
	}
}
