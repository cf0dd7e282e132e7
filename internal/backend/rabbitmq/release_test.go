package rabbitmq

import (
	"context"
	"slices"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// testRelease: deleting a set with deletionPolicy Discard. After two
// rotations and a generation an interrupted rotation left, Release leaves
// the current user alone, logging in with its password, tags and grants
// but without this set's mark (another set can adopt it, and this set's
// sweeps no longer see it); every other generation of the set is refused;
// users without the set's mark are untouched; a second Release changes
// nothing.
func testRelease(t *testing.T, br *broker) {
	ctx := context.Background()
	spec := br.spec("rel")
	spec.User.Tags = []string{"monitoring"}
	b := br.backend(t, spec)
	g1, g2, g3, g4 := gen(t, b, 1), gen(t, b, 2), gen(t, b, 3), gen(t, b, 4)
	if _, err := b.Provision(ctx, g1); err != nil {
		t.Fatal(err)
	}
	for i, step := range [][2]engine.Secrets{{g1, g2}, {g2, g3}} {
		if _, err := b.Apply(ctx, step[0], step[1], int64(i+2)); err != nil {
			t.Fatal(err)
		}
		if err := b.Retire(ctx, step[0], step[1]); err != nil {
			t.Fatal(err)
		}
	}
	// A rotation that applied g4 and was then forgotten, and an orphan.
	if _, err := b.Apply(ctx, g3, g4, 4); err != nil {
		t.Fatal(err)
	}
	br.putOwned(t, testOwner, "rel-g9", "orphan-password")
	br.login(t, b, "rel-g4", g4[KeyPassword], true) // or the refusal below proves nothing

	// Not this set's: made by hand, another set's, another base.
	foreign := map[string]string{"rel-g8": "hand-password", "rel-g5": "other-set-password", "rel-cell-g1": "cell-password"}
	br.putUser(t, "rel-g8", foreign["rel-g8"], "management")
	br.putOwned(t, otherOwner, "rel-g5", foreign["rel-g5"])
	br.putUser(t, "rel-cell-g1", foreign["rel-cell-g1"], OwnerTag(testOwner))
	before := map[string]state{}
	for u := range foreign {
		before[u] = br.state(t, u)
	}
	hash := br.passwordHash(t, "rel-g3")

	// Without a current user nothing is deleted.
	refused(t, b.Release(ctx, engine.Secrets{}), string(reason.KeyMismatch), "names no current user")
	if !br.exists(t, "rel-g4") || !br.exists(t, "rel-g3") {
		t.Fatal("a Release without a current user deleted a generation")
	}

	for range 2 { // idempotent: the engine calls it again after a crash
		if err := b.Release(ctx, g3); err != nil {
			t.Fatal(err)
		}
	}
	br.login(t, b, "rel-g3", g3[KeyPassword], true)
	if err := br.m.CanOpenVhost("rel-g3", g3[KeyPassword], "prod"); err != nil {
		t.Errorf("rel-g3 cannot open prod after Release: %v", err)
	}
	for _, s := range []engine.Secrets{g1, g2, g4, {KeyUsername: "rel-g9", KeyPassword: "orphan-password"}} {
		br.login(t, b, s[KeyUsername], s[KeyPassword], false)
		if br.exists(t, s[KeyUsername]) {
			t.Errorf("Release left %s", s[KeyUsername])
		}
	}
	want := specState(spec)
	want.tags = []string{"monitoring"}
	if got := br.state(t, "rel-g3"); !slices.Equal(got.tags, want.tags) || !slices.Equal(got.perms, want.perms) || !slices.Equal(got.topics, want.topics) {
		t.Errorf("released rel-g3 holds\n  %+v\nwant the spec's tags and grants without the mark\n  %+v", got, want)
	}
	if br.passwordHash(t, "rel-g3") != hash {
		t.Error("Release changed the password hash of rel-g3")
	}
	for u, pw := range foreign {
		br.unchanged(t, b, u, pw, before[u])
	}

	// Unmarked: this set's Deprovision no longer sees it, and a later set
	// adopts it.
	if err := b.Deprovision(ctx, g3); err != nil {
		t.Fatal(err)
	}
	if !br.exists(t, "rel-g3") {
		t.Fatal("the released rel-g3 was deleted by its former set's Deprovision")
	}
	later := br.spec("relnext")
	later.Adopt = &v1.RabbitMQAdopt{User: "rel-g3", PasswordSecretRef: v1.SecretKeyRef{Name: "adopt", Key: "password"}}
	next := br.backendOf(t, later, otherOwner)
	if err := next.ProveAdoption(ctx, g3[KeyPassword]); err != nil {
		t.Fatal(err)
	}
	p, err := next.Provision(ctx, g3)
	if err != nil || !p.Adopted {
		t.Fatalf("a later set's adoption of rel-g3: %+v, %v", p, err)
	}
	if tags := br.state(t, "rel-g3").tags; !slices.Equal(tags, []string{"monitoring", OwnerTag(otherOwner)}) {
		t.Errorf("adopted rel-g3 carries %v, want its tag and only the later set's mark", tags)
	}
	if err := b.Release(ctx, g3); err != nil { // the former set again: not its user any more
		t.Fatal(err)
	}
	if tags := br.state(t, "rel-g3").tags; !slices.Contains(tags, OwnerTag(otherOwner)) {
		t.Errorf("the former set's Release took the later set's mark: %v", tags)
	}

	// An adopted user the set never rotated is handed back as it was.
	const pw = "relback-password-0123456789"
	ad := br.backend(t, br.adoptSpec(t, "relback", "relback-app", pw))
	beforeAdopt := br.state(t, "relback-app")
	cur := engine.Secrets{KeyUsername: "relback-app", KeyPassword: pw}
	if _, err := ad.Provision(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if err := ad.Release(ctx, cur); err != nil {
		t.Fatal(err)
	}
	br.unchanged(t, ad, "relback-app", pw, beforeAdopt)
}
