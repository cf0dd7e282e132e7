package rabbitmq

import (
	"context"
	"slices"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

const otherOwner = "99999999-8888-4777-8666-555555555555"

// adoptSpec is spec adopting user, which services use with their own tags
// and grants.
func (br *broker) adoptSpec(t *testing.T, base, user, password string) *v1.RabbitMQSpec {
	t.Helper()
	br.putUser(t, user, password, "monitoring")
	br.do(t, "grant "+user, drain(br.admin.UpdatePermissionsIn("prod", user, permissions("^legacy\\."))))
	spec := br.spec(base)
	spec.Adopt = &v1.RabbitMQAdopt{User: user, PasswordSecretRef: v1.SecretKeyRef{Name: "adopt", Key: "password"}}
	return spec
}

// passwordHash is the hash the broker stores: unchanged means rekey never
// set the password, only proved it.
func (br *broker) passwordHash(t *testing.T, name string) string {
	t.Helper()
	u, err := br.admin.GetUser(name)
	br.do(t, "get user "+name, err)
	return u.PasswordHash
}

// testAdoptLifecycle: an adopted user becomes generation 1 keeping its
// password hash, tags and grants plus the set's mark; a rotation makes
// <base>-g2 from the spec; retiring deletes the adopted user. A wrong or
// empty password and a missing user are refused before anything changes.
func testAdoptLifecycle(t *testing.T, br *broker) {
	ctx := context.Background()
	const pw = "legacy-password-0123456789"
	spec := br.adoptSpec(t, "adopter", "legacy-app", pw)
	b := br.backend(t, spec)
	before := br.state(t, "legacy-app")
	hash := br.passwordHash(t, "legacy-app")

	for _, wrong := range []string{"not-the-password", ""} {
		err := b.ProveAdoption(ctx, wrong)
		refused(t, err, string(reason.ProvisionFailed), "adopt", wrong, pw, br.m.AdminPassword)
		if wrong != "" {
			refused(t, err, string(reason.ProvisionFailed), "does not log in as user legacy-app")
		}
		if wrong != "" {
			_, err = b.Provision(ctx, engine.Secrets{KeyUsername: "legacy-app", KeyPassword: wrong})
			refused(t, err, string(reason.ProvisionFailed), "does not log in as user legacy-app", wrong, pw)
		}
		br.unchanged(t, b, "legacy-app", pw, before)
	}
	missing := br.backend(t, func() *v1.RabbitMQSpec {
		s := br.spec("adopter")
		s.Adopt = &v1.RabbitMQAdopt{User: "no-such-user"}
		return s
	}())
	refused(t, missing.ProveAdoption(ctx, pw), string(reason.ProvisionFailed), "user no-such-user named in spec.rabbitmq.adopt.user does not exist")

	if err := b.ProveAdoption(ctx, pw); err != nil {
		t.Fatal(err)
	}
	cur := engine.Secrets{KeyUsername: "legacy-app", KeyPassword: pw}
	got, err := b.Provision(ctx, cur)
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 1 || !got.Adopted || got.Secrets[KeyUsername] != "legacy-app" || got.Secrets[KeyPassword] != pw {
		t.Fatalf("Provision of the adopted user: generation %d, adopted %v, user %s", got.Generation, got.Adopted, got.Secrets[KeyUsername])
	}
	if _, err := b.Provision(ctx, cur); err != nil { // idempotent
		t.Fatal(err)
	}
	after := br.state(t, "legacy-app")
	wantTags := slices.Sorted(slices.Values(append(slices.Clone(before.tags), OwnerTag(testOwner))))
	if !slices.Equal(after.tags, wantTags) || !slices.Equal(after.perms, before.perms) {
		t.Fatalf("adopted user holds %+v, want its own grants and tags plus the mark (%v)", after, wantTags)
	}
	if br.passwordHash(t, "legacy-app") != hash {
		t.Fatal("adoption changed the stored password hash: it must only prove the password")
	}
	br.login(t, b, "legacy-app", pw, true)

	// Reset of a rolled-back first rotation keeps what the user had.
	br.repassword(t, "legacy-app", "changed-by-hand-0123")
	if err := b.Reset(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if st := br.state(t, "legacy-app"); !slices.Equal(st.tags, wantTags) || !slices.Equal(st.perms, before.perms) {
		t.Fatalf("reset changed the adopted user's tags or grants: %+v", st)
	}
	br.login(t, b, "legacy-app", pw, true)

	pending := gen(t, b, 2)
	if pending[KeyUsername] != "adopter-g2" {
		t.Fatalf("generation 2 is %s", pending[KeyUsername])
	}
	if err := b.Precheck(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, cur, pending, 2); err != nil {
		t.Fatal(err)
	}
	br.exact(t, "adopter-g2", spec)
	br.login(t, b, "legacy-app", pw, true) // the overlap
	if err := b.Retire(ctx, cur, pending); err != nil {
		t.Fatal(err)
	}
	if br.exists(t, "legacy-app") {
		t.Fatal("the adopted user outlived the first rotation")
	}
	br.login(t, b, "adopter-g2", pending[KeyPassword], true)
	if err := b.Retire(ctx, cur, pending); err != nil { // after a crash
		t.Fatal(err)
	}
}

// testAdoptShared: two sets adopted the same user. The first to retire it
// only removes its own mark (the other set's consumers still log in); the
// last deletes it. A mark of a set that no longer exists does not keep it.
// Deleting a set that never rotated hands the user back unmarked.
func testAdoptShared(t *testing.T, br *broker) {
	ctx := context.Background()
	const pw = "shared-password-0123456789"
	specA := br.adoptSpec(t, "share-a", "shared-app", pw)
	specB := br.spec("share-b")
	specB.Adopt = specA.Adopt
	a, b := br.backend(t, specA), br.backendOf(t, specB, otherOwner)
	cur := engine.Secrets{KeyUsername: "shared-app", KeyPassword: pw}
	for _, x := range []*Backend{a, b} {
		if _, err := x.Provision(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	if tags := br.state(t, "shared-app").tags; !slices.Contains(tags, OwnerTag(testOwner)) || !slices.Contains(tags, OwnerTag(otherOwner)) {
		t.Fatalf("shared user tags %v: want both marks", tags)
	}
	pendA := gen(t, a, 2)
	if _, err := a.Apply(ctx, cur, pendA, 2); err != nil {
		t.Fatal(err)
	}
	if err := a.Retire(ctx, cur, pendA); err != nil {
		t.Fatal(err)
	}
	if tags := br.state(t, "shared-app").tags; slices.Contains(tags, OwnerTag(testOwner)) || !slices.Contains(tags, OwnerTag(otherOwner)) {
		t.Fatalf("after A retired it the shared user carries %v: want only B's mark", tags)
	}
	br.login(t, b, "shared-app", pw, true)
	if err := a.Retire(ctx, cur, pendA); err != nil { // after a crash: released already
		t.Fatal(err)
	}
	pendB := gen(t, b, 2)
	if _, err := b.Apply(ctx, cur, pendB, 2); err != nil {
		t.Fatal(err)
	}
	if err := b.Retire(ctx, cur, pendB); err != nil {
		t.Fatal(err)
	}
	if br.exists(t, "shared-app") {
		t.Fatal("the last set holding the shared user did not delete it")
	}

	// A stale mark (its set is gone) does not keep the user forever.
	const pw2 = "stale-password-0123456789"
	specC := br.adoptSpec(t, "stale-c", "stale-app", pw2)
	c := br.backend(t, specC)
	c.LiveOwner = func(uid string) bool { return uid == testOwner }
	br.putUser(t, "stale-app", pw2, "monitoring", OwnerTag(otherOwner))
	cur2 := engine.Secrets{KeyUsername: "stale-app", KeyPassword: pw2}
	if _, err := c.Provision(ctx, cur2); err != nil {
		t.Fatal(err)
	}
	pendC := gen(t, c, 2)
	if _, err := c.Apply(ctx, cur2, pendC, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.Retire(ctx, cur2, pendC); err != nil {
		t.Fatal(err)
	}
	if br.exists(t, "stale-app") {
		t.Fatal("a mark of a set that no longer exists kept the adopted user")
	}

	// Deleting a set before its first rotation hands the user back.
	const pw3 = "handback-password-0123456789"
	specD := br.adoptSpec(t, "back-d", "handback-app", pw3)
	d := br.backend(t, specD)
	before := br.state(t, "handback-app")
	cur3 := engine.Secrets{KeyUsername: "handback-app", KeyPassword: pw3}
	if _, err := d.Provision(ctx, cur3); err != nil {
		t.Fatal(err)
	}
	if err := d.Deprovision(ctx, cur3); err != nil {
		t.Fatal(err)
	}
	br.unchanged(t, d, "handback-app", pw3, before)
}

// New repeats admission's rule: an adopted user named like one of the
// set's generations would be deleted as one.
func TestAdoptNameRule(t *testing.T) {
	for _, c := range []struct {
		user string
		ok   bool
	}{{"nova", true}, {"nova-gold", true}, {"nova-g0", true}, {"nova-g2", false}, {"nova-g10", false}, {"-x", false}, {"", false}} {
		spec := &v1.RabbitMQSpec{Endpoint: "https://rabbit:15671", User: v1.RabbitMQUser{Base: "nova"}, Adopt: &v1.RabbitMQAdopt{User: c.user}}
		_, err := New(spec, testOwner, "admin", "admin-password", nil)
		if (err == nil) != c.ok {
			t.Errorf("adopt.user %q: %v, want ok=%v", c.user, err, c.ok)
		}
	}
}
