package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// CheckAnnotation carries a check request: a fresh ID, answered in
// status.check once the manager ran the set's checks (kubectl rekey
// check writes it, as kubectl annotate could).
const CheckAnnotation = "rekey.io/check"

// Finding is one check of one target: an instance, a consumer, the set.
// Its text is rekey's own words: never a secret, never what a server sent.
type Finding struct {
	// Target is what was checked ("10.0.0.5:3306", "Deployment shop/app").
	Target string
	// Check names the check ("reachable", "tls", "privileges", "user app@%").
	Check string
	OK    bool
	// Message says what was found; Fix what to do when it failed.
	Message, Fix string
	// Deferred: a failure a rotation is not refused for here, because a
	// later step handles it better: it clears by itself (an instance that
	// does not answer, for which the health gate holds the phase and
	// resumes it), or the backend's precheck refuses it with a reason of
	// its own (a secondary password rekey did not set).
	Deferred bool
}

// CheckInput is what a backend checks with: the secrets the set holds
// now (the source Secret's current ones, or those it adopts before it
// provisioned) and, during a rotation, the pending ones.
type CheckInput struct {
	Current, Pending Secrets
}

// Checker is implemented by backends that can verify, without changing
// anything, that a rotation would find what it needs: every instance
// reachable over the transport the spec asks for, a supported version,
// the admin's privileges, every identity present or adoptable. It runs
// with the set's own credentials, in the manager.
type Checker interface {
	Check(ctx context.Context, in CheckInput) []Finding
}

// Failed are the findings that failed.
func Failed(fs []Finding) []Finding {
	var out []Finding
	for _, f := range fs {
		if !f.OK {
			out = append(out, f)
		}
	}
	return out
}

// Blocking are the failed findings a rotation is refused for: those that
// do not clear by themselves.
func Blocking(fs []Finding) []Finding {
	var out []Finding
	for _, f := range Failed(fs) {
		if !f.Deferred {
			out = append(out, f)
		}
	}
	return out
}

// SortFindings puts failed findings first, each group in the order the
// checks produced it.
func SortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool { return !fs[i].OK && fs[j].OK })
}

// shownInRefusal is how many failed checks a refusal names; the rest are
// counted, and kubectl rekey check lists them all.
const shownInRefusal = 3

// PreflightMessage is the refusal of a rotation that failed checks (at
// least one): the first few with their fix, how many more, and where to
// see them all. name is the set's.
func PreflightMessage(id, name string, failed []Finding) string {
	var parts []string
	for i, f := range failed {
		if i == shownInRefusal {
			break
		}
		parts = append(parts, Short(f))
	}
	more := ""
	if n := len(failed) - shownInRefusal; n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	return fmt.Sprintf("rotation %s did not start: %d %s failed%s: %s. Nothing was changed. kubectl rekey check %s lists them all; fix them and run it again: the request stays, and the rotation starts once every check passes",
		id, len(failed), plural(len(failed), "check", "checks"), more, strings.Join(parts, "; "), name)
}

// Short is a finding in one line: target, check, message and fix.
func Short(f Finding) string {
	s := fmt.Sprintf("%s %s: %s", f.Target, f.Check, clip(f.Message, shortPart))
	if f.Fix != "" {
		s += " (fix: " + clip(f.Fix, shortPart) + ")"
	}
	return s
}

// shortPart bounds a message or fix in a one-line finding, so that a
// refusal naming a few of them fits an Event.
const shortPart = 200

// clip is s cut to n bytes, in valid UTF-8, marked as cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// ConsumerPatchMessage is what the check of a consumer of kind says once
// it exists: whether rekey may patch it (allowed), and what that patch
// does after a rotation. Nothing restarts a CronJob: rekey marks its job
// template, and it has moved once every Job it controls carries the mark
// or has finished.
func ConsumerPatchMessage(kind v1.ConsumerKind, allowed bool) string {
	if kind == v1.KindCronJob {
		if allowed {
			return "exists, and rekey may mark its job template (nothing restarts a CronJob: after a rotation it counts as rolled out once every Job it controls carries the mark or has finished)"
		}
		return "exists, but rekey's manager may not patch it, so it cannot mark its job template after a rotation"
	}
	if allowed {
		return "exists, and rekey may restart it"
	}
	return "exists, but rekey's manager may not patch it, so it cannot restart it after a rotation"
}
