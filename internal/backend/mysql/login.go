package mysql

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// A login is the only proof that MySQL accepts a password: a hash read
// from mysql.user on the admin session would say nothing of an account
// locked, expired or refused by its plugin. A login is itself the round
// trips (TCP, greeting, TLS, authentication), one connection per user, so
// it cannot be folded into the admin session's one statement. Instead the
// logins of one instance run concurrently, at most loginConcurrency at
// once: checking 64 users costs about 8 logins' time, not 64, without
// opening a connection per user at once (max_connections is shared with
// the applications).
const loginConcurrency = 8

// login is one password to try for one user.
type login struct {
	u        User
	password string
}

// loginCheckable: only accounts open to any host can be tried from here.
func (u User) loginCheckable() bool { return u.Host == "%" }

// verifyLogin opens a fresh connection as u with password.
func (b *Backend) verifyLogin(ctx context.Context, inst Instance, u User, password string) error {
	if !u.loginCheckable() {
		return nil
	}
	return checkLogin(ctx, b.transport, inst, u.Name, password)
}

// loginAll tries every login on inst, at most loginConcurrency at once
// and returns each
// result at its login's index: nil when MySQL accepted the password, a
// *loginRefused when it refused it, any other error when the attempt says
// nothing about the password (see checkLogin). The first such error stops
// the logins not yet finished and stands for all of them: an instance that
// stopped answering costs one login's timeout, not one per user.
func (b *Backend) loginAll(ctx context.Context, inst Instance, logins []login) []error {
	errs := make([]error, len(logins))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(loginConcurrency)
	for i, l := range logins {
		g.Go(func() error {
			errs[i] = b.verifyLogin(gctx, inst, l.u, l.password)
			if errs[i] != nil && !isLoginRefused(errs[i]) {
				return errs[i]
			}
			return nil
		})
	}
	if first := g.Wait(); first != nil {
		for i, err := range errs {
			if err != nil && !isLoginRefused(err) {
				errs[i] = first
			}
		}
	}
	return errs
}

// refusedOrNot sorts the results of logins: the accounts MySQL refused
// ("name@host on instance" when inst is set, else "name@host"), in the
// order tried, and the first error that says nothing about the password.
func refusedOrNot(logins []login, errs []error, inst string) (refused []string, other error) {
	for i, err := range errs {
		switch {
		case err == nil:
		case isLoginRefused(err):
			who := logins[i].u.String()
			if inst != "" {
				who += " on " + inst
			}
			refused = append(refused, who)
		case other == nil:
			other = err
		}
	}
	return refused, other
}

// Verify implements engine.Backend: every user that can be tried from here
// logs in with its password on every instance, before consumers are given
// it. Plain connections only: nothing is changed, so no session is needed.
// The instances are worked on Concurrency at a time, the logins of each
// concurrently (loginAll). Every account refused anywhere is named: a
// source Secret edited by hand is put right in one go, not one user per
// reconcile.
func (b *Backend) Verify(ctx context.Context, s engine.Secrets) error {
	var logins []login
	for _, u := range b.Users {
		if u.loginCheckable() {
			logins = append(logins, login{u, s[u.Key]})
		}
	}
	results := make([][]error, len(b.Instances))
	var g errgroup.Group
	g.SetLimit(max(b.Concurrency, 1))
	for i, inst := range b.Instances {
		g.Go(func() error {
			results[i] = b.loginAll(ctx, inst, logins)
			return nil
		})
	}
	_ = g.Wait()
	var refused []string
	var other error
	for i, inst := range b.Instances {
		r, o := refusedOrNot(logins, results[i], inst.Name)
		refused = append(refused, r...)
		if other == nil {
			other = o
		}
	}
	return verifyVerdict(refused, other)
}

// verifyVerdict: a refusal naming every account refused, when any was (it
// is MySQL's answer about the passwords, whatever else failed); else the
// first error that says nothing about them (an unreachable instance, a
// certificate that does not verify), for the caller to retry.
func verifyVerdict(refused []string, other error) error {
	if len(refused) == 0 {
		return other
	}
	return &engine.Refusal{Reason: string(reason.PendingRejected), Message: fmt.Sprintf(
		"MySQL refuses the password the source Secret holds for %s, so the distribution Secrets were not changed (consumers keep what works): the source Secret was edited by hand; run kubectl rekey recover",
		strings.Join(refused, ", "))}
}
