package plugin

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// testOnly is a backend the plugin has never heard of, registered as any
// backend is: the plugin speaks of its sets in its words and asks the
// engine with its traits, with no line of the plugin naming it. It
// selects sets by an annotation, which no other test sets.
const testOnlyAnnotation = "test.rekey.io/backend"

func init() {
	registry.Register(registry.Entry{
		Kind:    "testonly",
		Field:   "spec.testonly",
		Selects: func(cs *v1.CredentialSet) bool { return cs.Annotations[testOnlyAnnotation] == "testonly" },
		Describe: registry.Describe{
			Name:    "TestDB",
			Secrets: "tokens",
			// Rotates in place: an applied rotation can only complete.
			Traits: func(*v1.CredentialSet) engine.Traits { return engine.Traits{} },
			Words: func(*v1.CredentialSet) registry.Words {
				return registry.Words{Rotating: "wait: TestDB mints tokens", Retiring: "wait: TestDB forgets old tokens"}
			},
			Show: registry.Show{Formats: []string{"plain"},
				Pick: &registry.PickFlag{Flag: "token", Noun: "token", Form: "its label",
					Choices: func(*v1.CredentialSet) []string { return []string{"alpha", "beta"} }}},
			Repairs: []registry.Repair{{Reason: testOnlyForked, Cause: "a TestDB token was forked outside rekey",
				Help: "a TestDB token was forked:\nTestDB is reset to the current tokens", Held: "a forked token is still valid", LetGo: "leaving the fork"}},
			Help: registry.Help{Rotate: "mints new tokens next to the current ones", Show: "plain (the token); --token picks one",
				Recover: "forgets a forked token on a reset", Check: "the testdb grant command for the admin"},
			Rank: 9,
		},
	})
}

// testOnlyForked is the test-only backend's own refusal that recover
// repairs.
const testOnlyForked reason.Reason = "TokenForked"

func TestRegisteredBackendWords(t *testing.T) {
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "t",
		Annotations: map[string]string{testOnlyAnnotation: "testonly"}}}
	cs.Status = v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r-2", KeyGeneration: 1}
	if got, want := NextStep(cs), "wait: TestDB mints tokens"; got != want {
		t.Errorf("NextStep = %q, want %q", got, want)
	}
	cs.Status.ResetPending = true
	if got, want := NextStep(cs), "wait: resetting TestDB to the current tokens after the consumers rolled back"; got != want {
		t.Errorf("NextStep = %q, want %q", got, want)
	}
	// Its traits reach the engine: applied in place, the rotation cannot
	// be rolled back.
	cs.Status = v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotationID: "r-2", KeyGeneration: 1, RotateApplied: true}
	if _, err := abortable(cs); err == nil || !strings.Contains(err.Error(), "replaced the tokens in place (TestDB InPlace)") {
		t.Errorf("abortable = %v, want the in-place refusal in TestDB's words", err)
	}
}

// TestRegisteredBackendInHelp: a registered backend is in every help that
// lists backends, and show gets its flag, with no line of the plugin
// naming it.
func TestRegisteredBackendInHelp(t *testing.T) {
	root := NewRootCommand(Options{})
	if !strings.Contains(root.Long, "a RabbitMQ user, a\n           PostgreSQL login role, TestDB tokens) are made") {
		t.Errorf("the overview does not list what each backend's rotation makes:\n%s", root.Long)
	}
	for _, c := range []struct{ cmd, want string }{
		{"rotate", "  TestDB      mints new tokens next to the current ones\n"},
		{"show", "  TestDB      plain (the token); --token picks one\n"},
		{"recover", "  TestDB      forgets a forked token on a reset\n"},
		{"recover", "  TokenForked             a TestDB token was forked:\n                          TestDB is reset to the current tokens\n"},
		{"recover", "handles six documented"},
		{"check", "  TestDB      the testdb grant command for the admin\n"},
		{"check", "  MySQL       the GRANT that adds each privilege the admin lacks\n"},
	} {
		cmd, _, err := root.Find([]string{c.cmd})
		if err != nil || !strings.Contains(cmd.Long, c.want) {
			t.Errorf("%s --help lacks %q (%v):\n%s", c.cmd, c.want, err, cmd.Long)
		}
	}
	show, _, _ := root.Find([]string{"show"})
	for flag, usage := range map[string]string{
		"token":  "the TestDB token (its label); required when the set has several",
		"user":   "the MySQL user (NAME or NAME@HOST) or the PostgreSQL login (its base); required when the set has several",
		"entity": "the Ceph entity (e.g. client.csi); required when the set has several",
	} {
		if f := show.Flags().Lookup(flag); f == nil || f.Usage != usage {
			t.Errorf("show --%s: %v, want usage %q", flag, f, usage)
		}
	}
	if !slices.Contains(rotateRefusals(), testOnlyForked) {
		t.Errorf("rotate --wait does not stop at %s: %v", testOnlyForked, rotateRefusals())
	}
}

// TestShowPicks: show's flags pick an identity of the set's own backend,
// and one that picks another backend's is refused with the flag that
// picks this one's, or with none to give.
func TestShowPicks(t *testing.T) {
	testDB := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "t", Annotations: map[string]string{testOnlyAnnotation: "testonly"}}}
	for _, c := range []struct {
		cs          *v1.CredentialSet
		flags       map[string]string
		want, fails string
	}{
		{testDB, nil, "", ""},
		{testDB, map[string]string{"token": "beta"}, "beta", ""},
		{testDB, map[string]string{"user": "orders"}, "", `--user picks a MySQL user or a PostgreSQL login, but credentialset "t" is a TestDB set: pick the token with --token (alpha, beta)`},
		{hostsSet("ns", "m"), map[string]string{"user": "orders"}, "orders", ""},
		{hostsSet("ns", "m"), map[string]string{"token": "alpha"}, "", `--token picks a TestDB token, but credentialset "m" is a MySQL set: pick the user with --user (orders@%)`},
		{cephSet("ns", "c", v1.CephInPlace, "client.a"), map[string]string{"user": "x"}, "", `--user picks a MySQL user or a PostgreSQL login, but credentialset "c" is a Ceph set: pick the entity with --entity (client.a)`},
		{rabbitSet("ns", "r"), map[string]string{"entity": "client.a"}, "", `credentialset "r" is a RabbitMQ set with a single user (a new one per generation), so show takes no --entity: drop it`},
	} {
		flags := pickFlags()
		for _, f := range flags {
			f.value = c.flags[f.name]
		}
		got, err := pickFor(c.cs, backendOf(c.cs), flags)
		switch {
		case c.fails != "" && (err == nil || err.Error() != c.fails):
			t.Errorf("%s with %v: %q, %v; want the error %q", c.cs.Name, c.flags, got, err, c.fails)
		case c.fails == "" && (err != nil || got != c.want):
			t.Errorf("%s with %v: %q, %v; want %q", c.cs.Name, c.flags, got, err, c.want)
		}
	}
}

// TestRegisteredRepair: recover diagnoses a backend's own refusal in its
// words, and a deleted set it holds names recover.
func TestRegisteredRepair(t *testing.T) {
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Name: "t", Annotations: map[string]string{testOnlyAnnotation: "testonly"}}}
	cs.Status = v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 2}
	degraded(testOnlyForked, "token alpha has a fork")(&cs.Status)
	d, err := diagnose(cs, "req-1")
	if err != nil || d.cause != "a TestDB token was forked outside rekey (TokenForked)" {
		t.Fatalf("diagnose = %+v, %v; want TestDB's cause", d, err)
	}
	now := metav1.Now()
	cs.DeletionTimestamp = &now
	if got, want := nextStep(cs, now.Time), "being deleted (deletionPolicy Discard), held: a forked token is still valid; kubectl rekey recover t, or set deletionPolicy Retain to let go leaving the fork"; got != want {
		t.Errorf("next step %q, want %q", got, want)
	}
}
