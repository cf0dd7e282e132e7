package engine

import (
	"os"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "rekey.io/rekey/api/v1alpha1"
)

func TestStepOf(t *testing.T) {
	at := metav1.Now()
	one := []v1.ConsumerStatus{{Kind: "Deployment", Name: "app"}}
	cases := []struct {
		name string
		st   v1.CredentialSetStatus
		want v1.RotationStep
	}{
		{"never written", v1.CredentialSetStatus{}, StepProvisioning},
		{"pending", v1.CredentialSetStatus{Phase: v1.PhasePending}, StepProvisioning},
		{"idle", v1.CredentialSetStatus{Phase: v1.PhaseIdle, KeyGeneration: 3}, StepIdle},
		{"rotating, not applied", v1.CredentialSetStatus{Phase: v1.PhaseRotating}, StepApplying},
		{"rotating, applied", v1.CredentialSetStatus{Phase: v1.PhaseRotating, RotateApplied: true}, StepDistributing},
		{"distributed, a consumer not out", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotateApplied: true, Consumers: one}, StepAwaitingRollout},
		{"distributed, every consumer out", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotateApplied: true, Consumers: one, RolledOutAt: &at}, StepAwaitingDiscard},
		{"distributed, no consumer declared", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotateApplied: true}, StepAwaitingDiscard},
		{"discard begun", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotateApplied: true, DiscardStarted: true, RolledOutAt: &at}, StepDiscarding},
		{"discard applied", v1.CredentialSetStatus{Phase: v1.PhaseDistributed, RotateApplied: true, DiscardStarted: true, DiscardApplied: true}, StepConfirming},
		{"rolled back, consumers returning", v1.CredentialSetStatus{Phase: v1.PhaseIdle, ResetPending: true, Consumers: one}, StepRollingBack},
		{"rolled back, consumers returned", v1.CredentialSetStatus{Phase: v1.PhaseIdle, ResetPending: true, RolledOutAt: &at}, StepResetting},
		{"recover on a never-provisioned set", v1.CredentialSetStatus{Phase: v1.PhasePending, ResetPending: true}, StepRollingBack},
	}
	for _, c := range cases {
		if got := StepOf(c.st); got != c.want {
			t.Errorf("%s: StepOf = %s, want %s", c.name, got, c.want)
		}
	}
}

// TestStepTable: every step StepOf can answer has a row, in the phase its
// status is in, and the CRD's enum lists exactly the table's steps, so a
// status write can never be refused for its step.
func TestStepTable(t *testing.T) {
	rows := map[v1.RotationStep]StepInfo{}
	for _, s := range Steps {
		if _, dup := rows[s.Step]; dup {
			t.Fatalf("step %s has two rows", s.Step)
		}
		if s.State == "" || s.Next == "" {
			t.Errorf("step %s: the row must say the state and what runs next", s.Step)
		}
		rows[s.Step] = s
	}
	for _, ph := range []v1.RotationPhase{"", v1.PhasePending, v1.PhaseIdle, v1.PhaseRotating, v1.PhaseDistributed} {
		for _, b := range []bool{false, true} {
			st := v1.CredentialSetStatus{Phase: ph, RotateApplied: b, DiscardStarted: b}
			if _, ok := rows[StepOf(st)]; !ok {
				t.Errorf("phase %q: step %s has no row", ph, StepOf(st))
			}
		}
	}
	raw, err := os.ReadFile("../../config/crd/bases/rekey.io_credentialsets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	var enum []string
	for _, e := range crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["step"].Enum {
		enum = append(enum, strings.Trim(string(e.Raw), `"`))
	}
	var table []string
	for _, s := range Steps {
		table = append(table, string(s.Step))
	}
	if !slices.Equal(enum, table) {
		t.Errorf("the CRD's status.step enum is %v, the step table %v", enum, table)
	}
	shown := false
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		shown = shown || (c.Name == "Step" && c.JSONPath == ".status.step")
	}
	if !shown {
		t.Error("kubectl get does not show the step: the CRD has no Step printer column for .status.step")
	}
}

// TestStepTableInDocs: the concepts page's step table is the engine's,
// row for row, so what users read is what status.step means.
func TestStepTableInDocs(t *testing.T) {
	got := conceptsTable(t, "step table")
	var want []string
	for _, s := range Steps {
		want = append(want, "| `"+string(s.Step)+"` | "+string(s.Phase)+" | "+s.State+" | "+s.Next+" |")
	}
	if !slices.Equal(got, want) {
		t.Errorf("docs/concepts.md's step table differs from the engine's; want rows:\n%s", strings.Join(want, "\n"))
	}
}

// conceptsTable is the rows of docs/concepts.md's table between the
// markers "<!-- name" and "<!-- end of name -->".
func conceptsTable(t *testing.T, name string) []string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/concepts.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "<!-- "+name)
	end := strings.Index(doc, "<!-- end of "+name+" -->")
	if start < 0 || end < start {
		t.Fatalf("docs/concepts.md has no %s between its markers", name)
	}
	var rows []string
	for _, line := range strings.Split(doc[start:end], "\n") {
		if strings.HasPrefix(line, "| `") {
			rows = append(rows, line)
		}
	}
	return rows
}
