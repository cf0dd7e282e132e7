package controller

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/reason"
)

// Bounds of status.check (the CRD's maxItems and maxLength): a set with
// many instances and users must not make its status write fail.
const (
	maxFindings      = 64
	maxFindingText   = 1024
	maxFindingTarget = 256
	maxFindingCheck  = 128
	maxCheckID       = 128
)

// serveCheck answers a check request (rekey.io/check) that status.check
// does not answer yet: the set's checks run, with its own credentials,
// and their findings are written to status.check. It changes nothing
// else, whatever the checks find.
func (r *Reconciler) serveCheck(ctx context.Context, cs *v1.CredentialSet) error {
	id := clipText(cs.Annotations[engine.CheckAnnotation], maxCheckID)
	if id == "" || cs.Status.Check != nil && cs.Status.Check.ID == id {
		return nil
	}
	fs := r.requestedChecks(ctx, cs)
	res := checkResult(id, metav1.NewTime(r.now()), fs)
	return r.casStatus(ctx, cs, func(st *v1.CredentialSetStatus) { st.Check = res })
}

// requestedChecks runs every check of a set outside a reconcile's turn:
// the namespaces it reaches, its spec, its backend, its consumers.
func (r *Reconciler) requestedChecks(ctx context.Context, cs *v1.CredentialSet) []engine.Finding {
	if prob, err := r.checkNamespaces(ctx, cs); err != nil || prob != nil {
		return []engine.Finding{problemFinding("the set", "namespaces", prob, err)}
	}
	var fs []engine.Finding
	p, err := r.planFor(ctx, cs)
	if err != nil {
		fs = append(fs, problemFinding("the set", "configuration", nil, err))
	} else {
		in, err := r.checkInput(ctx, cs, p)
		if err != nil {
			fs = append(fs, problemFinding("the set", "source Secret", nil, err))
		} else {
			fs = append(fs, backendFindings(ctx, cs, p, in)...)
		}
	}
	return append(fs, r.consumerFindings(ctx, cs)...)
}

// checkInput is the secrets the set holds now: the source Secret's
// current (and, during a rotation, pending) ones, and those it adopts
// where the source Secret has none yet.
func (r *Reconciler) checkInput(ctx context.Context, cs *v1.CredentialSet, p *plan) (engine.CheckInput, error) {
	in := engine.CheckInput{Current: engine.Secrets{}}
	src, err := r.getSourceSecret(ctx, cs)
	if err != nil {
		return in, err
	}
	keys := p.backend.Keys()
	if src != nil {
		in.Current, _ = engine.Current(src.Data, keys)
		if in.Current == nil {
			in.Current = engine.Secrets{}
		}
		// A key listed since the rotation began has no new secret, and
		// none is owed (engine.OutsideRotation).
		rot := engine.InRotation(cs.Status, keys)
		if engine.RotationInFlight(cs.Status) && engine.InspectPending(src.Data, rot, cs.Status.RotationID) == engine.PendingMatch {
			in.Pending = engine.Pending(src.Data, rot)
		}
	}
	for k, v := range p.adopt {
		if in.Current[k] == "" {
			in.Current[k] = v
		}
	}
	return in, nil
}

// preflight runs the set's checks before a rotation starts and refuses
// it (PreflightFailed) for a check that fails and does not clear by
// itself; an instance that does not answer is left to the health gate,
// which holds the rotation and resumes it.
func (r *Reconciler) preflight(ctx context.Context, t *turn, id string) error {
	in := engine.CheckInput{Current: t.cur}
	fs := append(backendFindings(ctx, t.cs, t.p, in), r.consumerFindings(ctx, t.cs)...)
	if blocking := engine.Blocking(fs); len(blocking) > 0 {
		return &engine.Refusal{Reason: string(reason.PreflightFailed), Message: engine.PreflightMessage(id, t.cs.Name, blocking)}
	}
	return nil
}

// backendFindings are the backend's own checks, or one finding saying
// that it has none yet.
func backendFindings(ctx context.Context, cs *v1.CredentialSet, p *plan, in engine.CheckInput) []engine.Finding {
	if c, ok := p.backend.(engine.Checker); ok {
		return c.Check(ctx, in)
	}
	name, field := "this backend's", "the set"
	if e, ok := registry.For(cs); ok {
		name, field = e.Describe.Name, e.Field
	}
	return []engine.Finding{{Target: field, Check: "backend", OK: true, Message: fmt.Sprintf(
		"rekey has no checks of %s servers yet: only the spec and the consumers were checked, and a rotation reports what it finds as it goes", name)}}
}

// consumerFindings check that each declared consumer workload exists and
// that rekey may restart it, or mark a CronJob's job template (a
// server-side dry run of the patch it makes, which changes nothing).
func (r *Reconciler) consumerFindings(ctx context.Context, cs *v1.CredentialSet) []engine.Finding {
	var fs []engine.Finding
	for _, c := range cs.Spec.Consumers {
		ns := consumerNamespace(cs, c)
		f := engine.Finding{Target: fmt.Sprintf("%s %s/%s", c.Kind, ns, c.Name), Check: "consumer"}
		obj := newWorkload(c.Kind)
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name}, obj)
		switch {
		case apierrors.IsNotFound(err):
			f.Message = "does not exist"
			f.Fix = fmt.Sprintf("create %s %s in namespace %s, or remove it from spec.consumers: rekey restarts each consumer after a rotation and waits for its rollout before it discards the old credentials", c.Kind, c.Name, ns)
		case err != nil:
			f.Message = "cannot be read: " + apiReason(err)
			f.Fix = fmt.Sprintf("grant rekey's manager get on %ss in namespace %s", strings.ToLower(string(c.Kind)), ns)
		default:
			f = r.patchable(ctx, cs, obj, c.Kind, f)
		}
		fs = append(fs, f)
	}
	return fs
}

// patchable dry-runs the restart patch on obj: what a rotation's restart
// would meet (RBAC, admission), with nothing changed.
func (r *Reconciler) patchable(ctx context.Context, cs *v1.CredentialSet, obj client.Object, kind v1.ConsumerKind, f engine.Finding) engine.Finding {
	key := naming.RestartAnnotation(cs)
	value := templateAnnotations(obj)[key]
	if value == "" {
		value = "check"
	}
	err := r.Client.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, templatePatch(obj, key, value)), client.DryRunAll)
	switch {
	case err == nil:
		f.OK, f.Message = true, engine.ConsumerPatchMessage(kind, true)
	case apierrors.IsForbidden(err):
		f.Message = engine.ConsumerPatchMessage(kind, false)
		f.Fix = fmt.Sprintf("grant rekey's manager patch on %ss in namespace %s", strings.ToLower(string(kind)), obj.GetNamespace())
	default:
		f.Message = "exists, but a restart patch was refused: " + apiReason(err)
		f.Fix = "check the admission policies and webhooks that match it"
	}
	return f
}

// apiReason is an API error in a few words (its reason and code).
func apiReason(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok {
		st := s.Status()
		return fmt.Sprintf("%s (%d)", st.Reason, st.Code)
	}
	// Not the API server's answer: the manager's cache does not cover
	// the namespace (--watch-namespaces), or the call never got through.
	return "rekey's manager could not read it (is its namespace among those it watches?)"
}

// problemFinding is a finding for what stops the checks before the
// backend: a spec the manager refuses, a namespace not consented to, a
// Secret that cannot be read.
func problemFinding(target, check string, prob *problem, err error) engine.Finding {
	f := engine.Finding{Target: target, Check: check}
	if prob == nil && err != nil {
		prob = classify(err)
	}
	switch {
	case prob != nil:
		f.Message = prob.message
		f.Fix = "see the message"
		if prob.reason == reason.InvalidSpec {
			f.Fix = "fix the CredentialSet spec"
		}
	case err != nil:
		f.Message = err.Error()
		f.Fix = "see the message"
	}
	return f
}

// checkResult is status.check for findings fs: failed ones first, within
// the CRD's bounds (the ones left out counted, passed ones first).
func checkResult(id string, at metav1.Time, fs []engine.Finding) *v1.CheckResult {
	fs = append([]engine.Finding(nil), fs...)
	engine.SortFindings(fs)
	res := &v1.CheckResult{ID: clipText(id, maxCheckID), CheckedAt: at, Passed: len(engine.Failed(fs)) == 0}
	if len(fs) > maxFindings {
		res.Omitted = int32(len(fs) - maxFindings)
		fs = fs[:maxFindings]
	}
	for _, f := range fs {
		res.Findings = append(res.Findings, v1.CheckFinding{
			Target: clipText(f.Target, maxFindingTarget), Check: clipText(f.Check, maxFindingCheck), OK: f.OK,
			Message: clipText(f.Message, maxFindingText), Fix: clipText(f.Fix, maxFindingText),
		})
	}
	return res
}

// clipText is s within n bytes (the CRD counts characters; bytes are
// never fewer), in valid UTF-8, marked where it was cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-len("…")], "") + "…"
}
