package e2e

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/controller"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// setWrites counts, per set, the writes the API server made of it (each
// MODIFIED watch event is one new resourceVersion), and the phases seen.
type setWrites struct {
	mu     sync.Mutex
	n      map[string]int
	phases map[string][]v1.RotationPhase
	// steps: the distinct status.step values seen, in order; wrongStep:
	// writes whose step is not the one the rest of their status says.
	steps     map[string][]v1.RotationStep
	wrongStep []string
}

func watchSetWrites(t *testing.T, ns string) *setWrites {
	t.Helper()
	wc, err := client.NewWithWatch(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctxT(t), &v1.CredentialSetList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	s := &setWrites{n: map[string]int{}, phases: map[string][]v1.RotationPhase{}, steps: map[string][]v1.RotationStep{}}
	go func() {
		for ev := range w.ResultChan() {
			cs, ok := ev.Object.(*v1.CredentialSet)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			s.mu.Lock()
			s.n[cs.Name]++
			if p := s.phases[cs.Name]; len(p) == 0 || p[len(p)-1] != cs.Status.Phase {
				s.phases[cs.Name] = append(p, cs.Status.Phase)
			}
			if p := s.steps[cs.Name]; len(p) == 0 || p[len(p)-1] != cs.Status.Step {
				s.steps[cs.Name] = append(p, cs.Status.Step)
			}
			if want := engine.StepOf(cs.Status); cs.Status.Phase != "" && cs.Status.Step != want {
				s.wrongStep = append(s.wrongStep, fmt.Sprintf("%s at resourceVersion %s: step %q, its status says %s", cs.Name, cs.ResourceVersion, cs.Status.Step, want))
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *setWrites) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[name]
}

// attempts is how many reconciles of the set reached its backend and
// failed (rekey_refusals_total over every reason; a reconcile its backoff
// holds does not count).
func attempts(t testing.TB, ns, name string) int {
	t.Helper()
	fams, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range fams {
		if f.GetName() != "rekey_refusals_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			if have["namespace"] == ns && have["name"] == name {
				total += value(m)
			}
		}
	}
	return int(total)
}

// eventsAbout is how many Event objects regard the set, and the count they
// stand for (an Event of a series counts its series' count).
func eventsAbout(t testing.TB, ns, name string) (objects, count int, reasons []string) {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Name != name {
			continue
		}
		objects++
		reasons = append(reasons, e.Reason)
		if e.Series != nil {
			count += int(e.Series.Count)
		} else {
			count++
		}
	}
	return objects, count, reasons
}

// TestQuietUnderFailure: two new sets pointing at a closed MySQL port (one
// server: they share its backend lock), with a consumer Deployment that
// keeps changing, against the real API server and the real manager. The
// backoff holds whatever wakes them: the consumer's 30 changes bring no
// attempt each; a repeated failure writes nothing (no status write from
// the third attempt to the fifth); the Events stay a handful; the Warning
// is never seen before the condition it reports; and the sets show
// Pending, never Idle, having never been provisioned.
func TestQuietUnderFailure(t *testing.T) {
	ns := newNamespace(t)
	writes := watchSetWrites(t, ns)
	startManager(t, cp.Config)
	createSecret(t, ns, "admin", map[string]string{"password": "not-used-nothing-listens"})
	web := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
			},
		},
	}
	if err := k8s.Create(ctxT(t), web); err != nil {
		t.Fatal(err)
	}
	host := freePort(t) // nothing listens there
	for _, name := range []string{"broken-a", "broken-b"} {
		cs := &v1.CredentialSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1.CredentialSetSpec{
				MySQL: &v1.MySQLSpec{
					Instances: v1.MySQLInstances{Hosts: []string{host}},
					Admin:     v1.MySQLAdmin{User: "root", PasswordSecretRef: &v1.SecretKeyRef{Name: "admin", Key: "password"}},
					Users:     []v1.MySQLUser{{Name: "app"}},
				},
				Distribution: []v1.SecretTarget{{Namespace: ns, Name: name + "-db"}},
				Consumers:    []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "web"}},
			},
		}
		if err := k8s.Create(ctxT(t), cs); err != nil {
			t.Fatal(err)
		}
	}

	// The first Warning: by then its condition is written.
	waitFor(t, time.Minute, "a Warning about broken-a", func() (bool, string) {
		_, _, reasons := eventsAbout(t, ns, "broken-a")
		return len(reasons) > 0, fmt.Sprint(reasons)
	})
	cs := getSet(t, ns, "broken-a")
	if c := condition(cs, reason.CondDegraded); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("a Warning was stored while the set's Degraded condition is %+v", c)
	}
	if strings.Contains(c0(cs).Message, "attempts in a row") {
		t.Errorf("the condition counts attempts: %q", c0(cs).Message)
	}

	waitFor(t, time.Minute, "3 failed attempts of broken-a", func() (bool, string) {
		n := attempts(t, ns, "broken-a")
		return n >= 3, fmt.Sprintf("%d attempts", n)
	})
	before, writesBefore := attempts(t, ns, "broken-a"), writes.count("broken-a")
	degraded := *c0(getSet(t, ns, "broken-a"))

	// 30 changes of the consumer, each of which queues both sets.
	for i := range 30 {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(web), d); err != nil {
			t.Fatal(err)
		}
		d.Labels = map[string]string{"poke": strconv.Itoa(i)}
		if err := k8s.Update(ctxT(t), d); err != nil && !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	afterPokes := attempts(t, ns, "broken-a")
	if afterPokes-before > 3 {
		t.Errorf("30 changes of a consumer made %d attempts of a set in backoff (from %d to %d)", afterPokes-before, before, afterPokes)
	}

	waitFor(t, 2*time.Minute, "2 more failed attempts of broken-a", func() (bool, string) {
		n := attempts(t, ns, "broken-a")
		return n >= afterPokes+2, fmt.Sprintf("%d attempts", n)
	})
	final := attempts(t, ns, "broken-a")
	cs = getSet(t, ns, "broken-a")
	if got := writes.count("broken-a") - writesBefore; got != 0 {
		t.Errorf("%d writes of the set from its attempt %d to %d: a repeated failure wrote something new", got, before, final)
	}
	if now := c0(cs); now.Message != degraded.Message || !now.LastTransitionTime.Equal(&degraded.LastTransitionTime) {
		t.Errorf("the Degraded condition changed between identical failures:\n%q\n%q", degraded.Message, now.Message)
	}
	if total := writes.count("broken-a"); total > 4 {
		t.Errorf("%d writes of the set in %d attempts, want at most 4 (phase, finalizer, conditions)", total, final)
	}
	objects, count, reasons := eventsAbout(t, ns, "broken-a")
	// The recorder folds a repeated Warning into one series as long as
	// the set it regards keeps its resourceVersion: one object for the
	// Warning before the condition's write, one after, whatever the count.
	if objects > 3 || count > final+1 {
		t.Errorf("%d Events standing for %d occurrences (%v) in %d attempts, want at most 3 objects and one occurrence an attempt", objects, count, reasons, final)
	}
	for _, name := range []string{"broken-a", "broken-b"} {
		cs := getSet(t, ns, name)
		writes.mu.Lock()
		seen := writes.phases[name]
		writes.mu.Unlock()
		if cs.Status.Phase != v1.PhasePending || cs.Status.KeyGeneration != 0 {
			t.Errorf("%s: phase %s generation %d, want Pending 0", name, cs.Status.Phase, cs.Status.KeyGeneration)
		}
		for _, p := range seen {
			if p == v1.PhaseIdle {
				t.Errorf("%s: shown Idle without ever being provisioned (phases %v)", name, seen)
			}
		}
	}
	t.Logf("broken-a: %d failed attempts (%d during 30 consumer changes), %d writes of the set, %d Events (%d occurrences: %v); broken-b: %d attempts",
		final, afterPokes-before, writes.count("broken-a"), objects, count, reasons, attempts(t, ns, "broken-b"))
}

// c0 is the set's Degraded condition (a zero one when absent).
func c0(cs *v1.CredentialSet) *metav1.Condition {
	if c := condition(cs, reason.CondDegraded); c != nil {
		return c
	}
	return &metav1.Condition{}
}

// eventReasonsOf lists the Event reasons of internal/reason (every Reason
// constant but the block of condition-only ones).
func eventReasonsOf(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(env.RepoRoot, "internal/reason/reason.go"), nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST || g.Doc != nil && strings.Contains(g.Doc.Text(), "not also Event reasons") {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
				continue
			}
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok {
					s, _ := strconv.Unquote(lit.Value)
					out = append(out, s)
				}
			}
		}
	}
	if len(out) < 40 {
		t.Fatalf("found only %d Event reasons", len(out))
	}
	return out
}

// TestEventNotesStored: for every Event reason, the largest message it
// could carry — a list at the API's maximum sizes (64 users on 128
// instances, names of 253 characters), well over any limit — becomes a
// note the real API server stores, through the events.k8s.io recorder
// the manager uses; the same message unbounded is refused by that server.
func TestEventNotesStored(t *testing.T) {
	ns := newNamespace(t)
	regarding := &v1.CredentialSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "notes"},
		Spec: v1.CredentialSetSpec{MySQL: &v1.MySQLSpec{
			Instances: v1.MySQLInstances{Hosts: []string{"127.0.0.1:1"}},
			Admin:     v1.MySQLAdmin{User: "root", PasswordSecretRef: &v1.SecretKeyRef{Name: "admin", Key: "password"}},
			Users:     []v1.MySQLUser{{Name: "app"}},
		}},
	}
	if err := k8s.Create(ctxT(t), regarding); err != nil {
		t.Fatal(err)
	}
	var pairs []string
	for u := range 64 {
		for i := range 128 {
			pairs = append(pairs, fmt.Sprintf("%0120d@%% on %0120d.db.%s.svc:3306", u, i, ns))
		}
	}
	largest := strings.Join(pairs, ", ") + " already has a secondary password; reset it with ALTER USER ... DISCARD OLD PASSWORD (kubectl rekey recover does this), then rotate again"

	// The limit is real: the server refuses the message as it is.
	raw := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unbounded"}, EventTime: metav1.NowMicro(),
		ReportingController: "rekey.io/test", ReportingInstance: "test", Action: "Test", Reason: "Test", Type: "Warning",
		Regarding: corev1.ObjectReference{APIVersion: v1.GroupVersion.String(), Kind: "CredentialSet", Namespace: ns, Name: "notes"},
		Note:      largest[:1025],
	}
	if err := k8s.Create(ctxT(t), raw); !apierrors.IsInvalid(err) {
		t.Fatalf("a 1,025-byte note: %v, want the API server to refuse it as invalid", err)
	}

	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	rec := b.NewRecorder(scheme, "rekey")
	reasons := eventReasonsOf(t)
	want := map[string]string{}
	for _, why := range reasons {
		note := controller.EventNote(why + ": " + largest)
		want[why] = note
		rec.Eventf(regarding, nil, corev1.EventTypeWarning, why, "Test", "%s", note)
	}
	waitFor(t, time.Minute, fmt.Sprintf("%d Events stored", len(reasons)), func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		got := map[string]string{}
		for _, e := range list.Items {
			if e.Regarding.Name == "notes" {
				got[e.Reason] = e.Note
			}
		}
		var missing []string
		for why, note := range want {
			if got[why] != note {
				missing = append(missing, why)
			}
		}
		return len(missing) == 0, fmt.Sprintf("missing or different: %v", missing)
	})
	for why, note := range want {
		if len(note) > 1000 || !strings.HasSuffix(note, "then rotate again") || !strings.HasPrefix(note, why+": ") {
			t.Errorf("%s: note of %d bytes, or without its start and its next step: %.200q", why, len(note), note)
		}
	}
	t.Logf("%d reasons: a %d-byte message stored as a note of at most %d bytes", len(reasons), len(largest), len(want[reasons[0]]))
}
