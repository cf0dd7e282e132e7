package mysql

import (
	"context"
	"fmt"
)

// An instance re-initialised from an empty data directory lacks rekey's
// users: rekey runs its credential DDL with sql_log_bin=0, so a rebuilt
// replica replaying the primary's binary logs never sees them (no
// credential change propagates by replication). Each phase repairs such an instance with the secrets the source
// Secret holds for that phase, so it ends like every other instance:
//
//   - Provision and Reset create a missing user accepting cur;
//   - Apply creates it accepting cur, then retains pending as everywhere;
//   - Retire creates it accepting pending only — what consumers hold once
//     the rotation is distributed — and only if another instance proves
//     MySQL accepts that password (it learned it from rekey), or refuses.
//
// A CLONE'd instance has its donor's rows and needs nothing special.

// creatingAttribute marks a user rekey is creating: CREATE USER and its
// GRANTs are separate statements, and a crash between them must not leave
// a user without grants that a re-run takes for a finished one. The mark
// lives in mysql.user (User_attributes.metadata), so MySQL, not rekey's
// memory, says that the creation is unfinished, also after a crash.
const (
	creatingAttribute = `'{"rekey": "creating"}'`
	createdAttribute  = `'{"rekey": null}'` // null removes the key
)

// swappingAttribute marks a user whose passwords RepairPending is
// swapping (pending_repair.go): after the first of its two statements the
// user holds cur as primary and pending as secondary, which a DISCARD
// would turn into cur only. The mark tells every later phase to finish the
// swap first. Set and cleared in the very statements that change the
// passwords, so it is never out of step with them.
const swappingAttribute = `'{"rekey": "swapping"}'`

// account is what mysql.user says of one user on one instance.
type account struct {
	exists   bool
	dual     bool // has a secondary password (RETAIN already ran)
	creating bool // created by rekey, grants not yet confirmed
	swapping bool // a password swap by RepairPending is half done
	// replication: granted REPLICATION SLAVE globally, so a replica may
	// use it as its source user (mysql.user only knows direct grants, not
	// a role's).
	replication bool
	// owner is the UID of the set rekey created the user for ("" when
	// none: adopted, or created by a rekey that did not mark).
	owner string
	// mark: the generation rekey last applied to it (nil: none recorded;
	// generation.go).
	mark *genMark
}

// needsCreate: the user is missing or its creation was interrupted.
func (a account) needsCreate() bool { return !a.exists || a.creating }

// createUser creates u accepting password, with its grants, or finishes a
// creation a crash interrupted (the user then keeps the password it was
// created with), marked as holding generation gen. Every statement is
// idempotent.
func (s *session) createUser(ctx context.Context, u User, password string, gen int64) error {
	mark := creatingAttributeFor(s.owner)
	if s.adopted[u.Key] {
		mark = creatingAttribute
	}
	// The owner's mark comes with the user, in one statement: no crash
	// leaves a user rekey created unmarked. IF NOT EXISTS leaves the
	// attributes of a user that exists (an interrupted creation) as they
	// are.
	if err := s.write(ctx, "CREATE USER IF NOT EXISTS "+u.Account()+" IDENTIFIED BY "+quote(password)+" ATTRIBUTE "+mark); err != nil {
		return err
	}
	for _, g := range u.grantStatements() {
		if err := s.write(ctx, g); err != nil {
			return err
		}
	}
	return s.write(ctx, "ALTER USER "+u.Account()+" "+attributeTail(createdPatch(), markPatch(gen, false)))
}

// acceptedElsewhere reports whether an instance other than inst accepts
// password for u: proof that MySQL learned it from rekey, so that creating
// u with it on inst applies nothing new.
func (b *Backend) acceptedElsewhere(ctx context.Context, inst Instance, u User, password string) bool {
	for _, other := range b.Instances {
		if other.Name != inst.Name && checkLogin(ctx, b.transport, other, u.Name, password) == nil {
			return true
		}
	}
	return false
}

// missingRefusal: u is missing on inst and nothing proves which password
// its consumers hold.
func missingRefusal(inst Instance, u User) string {
	return fmt.Sprintf("user %s does not exist on %s (re-initialised from an empty data directory?) and no other instance accepts the new password the source Secret holds for it, so rekey cannot tell that its consumers hold that password; nothing was created or discarded there. The discard began, so the rotation can only complete (abort and recover are refused): create the user there by hand with the new password (CREATE USER ... IDENTIFIED BY the value of its _PENDING key in the source Secret, with its grants) and the discard finishes by itself", u, inst.Name)
}
