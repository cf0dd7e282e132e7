package ceph

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"rekey.io/rekey/internal/engine"
)

var _ engine.Checker = (*Backend)(nil)

// Check implements engine.Checker: whether a monitor answers, whether it
// accepts the admin's key, whether the admin has the caps rekey's
// commands need (mon 'allow *'), and the monitors' version (for InPlace,
// one with `ceph auth rotate`). It runs only commands that change
// nothing, as the admin.
func (b *Backend) Check(ctx context.Context, _ engine.CheckInput) []engine.Finding {
	target := strings.Join(b.monitors, ",")
	s, err := b.open(ctx)
	if err != nil {
		return []engine.Finding{{Target: target, Check: "admin keyring", Message: err.Error(),
			Fix: fmt.Sprintf("put %s's keyring in %s", b.admin, b.adminSecret())}}
	}
	defer s.close()
	self, err := s.get(ctx, b.admin)
	if err != nil {
		return b.connectFindings(target, err)
	}
	fs := []engine.Finding{
		{Target: target, Check: "reachable", OK: true, Message: "a monitor answers"},
		{Target: target, Check: "login", OK: true, Message: "the monitors accept the key of " + b.admin},
		b.capsFinding(target, self.Caps),
	}
	v, err := s.version(ctx)
	switch {
	case err != nil:
		fs = append(fs, engine.Finding{Target: target, Check: "version", Message: "unreadable: " + b.adminError(b.admin, err).Error(), Fix: "see the message"})
	case !b.overlap && inPlaceRefusal(v) != nil:
		// Deferred: the rotation's own InPlaceUnsupported refusal says the
		// same and is retried, so an upgrade of the monitors lets the
		// rotation go ahead by itself.
		rf, _ := engine.AsRefusal(inPlaceRefusal(v))
		fs = append(fs, engine.Finding{Target: target, Check: "version", Message: rf.Message, Deferred: true,
			Fix: "upgrade the monitors to " + MinRotateVersion + " or later, or set spec.ceph.strategy: Overlapping for client entities"})
	default:
		fs = append(fs, engine.Finding{Target: target, Check: "version", OK: true, Message: "Ceph " + release.FindString(v)})
	}
	return fs
}

// connectFindings say why the admin's first command failed.
func (b *Backend) connectFindings(target string, err error) []engine.Finding {
	reached := engine.Finding{Target: target, Check: "reachable", OK: true, Message: "a monitor answers"}
	switch {
	case errors.Is(err, errTimedOut):
		reached.OK, reached.Deferred = false, true
		reached.Message = "no monitor answered in time"
		reached.Fix = "check that the monitors in spec.ceph.monitors run and that the manager's network reaches them"
		return []engine.Finding{reached}
	case errors.Is(err, ErrAuthFailed):
		return []engine.Finding{reached, {Target: target, Check: "login",
			Message: fmt.Sprintf("the monitors refuse the key of %s (cephx authentication failed)", b.admin),
			Fix:     fmt.Sprintf("put %s's current keyring (ceph auth get %s) in %s", b.admin, b.admin, b.adminSecret())}}
	case errors.Is(err, ErrDenied):
		return []engine.Finding{reached, {Target: target, Check: "caps",
			Message: fmt.Sprintf("%s may not read its own entry (ceph auth get: EACCES)", b.admin),
			Fix:     fmt.Sprintf("ceph auth caps %s mon 'allow *' (as client.admin; it replaces the entity's caps)", b.admin)}}
	}
	reached.OK, reached.Message = false, "the admin's command failed: "+err.Error()
	reached.Fix = "check spec.ceph.monitors and spec.ceph.config"
	return []engine.Finding{reached}
}

// capsFinding: rekey's commands (auth get-or-create, rotate, rm, caps,
// config-key) need the admin's mon 'allow *'. Other caps may serve some of
// them: a difference is reported, and left to the commands to refuse
// (Deferred).
func (b *Backend) capsFinding(target string, caps map[string]string) engine.Finding {
	f := engine.Finding{Target: target, Check: "caps", OK: true, Message: b.admin + " has mon 'allow *'"}
	if strings.TrimSpace(caps["mon"]) == "allow *" {
		return f
	}
	f.OK, f.Deferred = false, true
	f.Message = fmt.Sprintf("%s has mon caps %q, not the 'allow *' rekey's commands need (auth get-or-create, rotate, rm, config-key)", b.admin, caps["mon"])
	f.Fix = fmt.Sprintf("ceph auth caps %s mon 'allow *' (as client.admin; it replaces the entity's caps: repeat its other caps)", b.admin)
	return f
}
