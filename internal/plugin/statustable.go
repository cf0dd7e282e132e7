package plugin

import (
	"fmt"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// statusColumns are the status table's columns, as a server-side table
// declares them: cli-runtime's table printer adds NAMESPACE (-A), labels
// (--show-labels, -L), leaves out the headers (--no-headers) and shows the
// priority-1 columns only with -o wide.
var statusColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "the CredentialSet"},
	{Name: "Phase", Type: "string", Description: "status.phase"},
	{Name: "Step", Type: "string", Description: "status.step: what the rotation is doing or waiting for"},
	{Name: "Generation", Type: "integer", Description: "status.keyGeneration"},
	{Name: "Rotation", Type: "string", Description: "the active rotation"},
	{Name: "Age", Type: "string", Description: "age of the current credentials"},
	{Name: "Consumers", Type: "string", Description: "consumers (and group members) on the newest credentials"},
	{Name: "Last Event", Type: "string", Description: "the reason of the newest Event about the set"},
	{Name: "Next Step", Type: "string", Description: "what happens next, short (status -v: in full)"},
	{Name: "Backend", Type: "string", Priority: 1},
	{Name: "Discard", Type: "string", Priority: 1, Description: "spec.rotation.discardPolicy"},
	{Name: "Last Rotation", Type: "string", Priority: 1, Description: "status.lastRotationID"},
}

// statusTable is the status table of sets: its rows come from spec,
// status and evs (the Events about them) only.
func statusTable(sets []v1.CredentialSet, evs []eventsv1.Event, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: statusColumns}
	for i := range sets {
		cs := &sets[i]
		t.Rows = append(t.Rows, statusRow(cs, eventsAbout(evs, cs), now))
	}
	return t
}

// statusRow is one set's row; evs are its Events, oldest first.
func statusRow(cs *v1.CredentialSet, evs []eventsv1.Event, now time.Time) metav1.TableRow {
	st := cs.Status
	age := "-"
	if st.CurrentSince != nil {
		age = duration.HumanDuration(now.Sub(st.CurrentSince.Time))
	}
	last := "-"
	if len(evs) > 0 {
		last = evs[len(evs)-1].Reason
	}
	return metav1.TableRow{
		Cells: []any{cs.Name, orDash(string(st.Phase)), orDash(stepOf(cs)), st.KeyGeneration, orDash(st.RotationID), age,
			consumersCell(cs), last, tableStep(cs, now), backendName(cs), discardPolicy(cs), orDash(st.LastRotationID)},
		Object: runtime.RawExtension{Object: cs},
	}
}

// stepOf is status.step, which the operator derives from the rest of the
// status (empty from a manager that predates it).
func stepOf(cs *v1.CredentialSet) string { return string(cs.Status.Step) }

// consumersCell is "n/m" consumers moved; with consumer groups it adds the
// members acknowledged across all groups, "n/m members x/y".
func consumersCell(cs *v1.CredentialSet) string {
	cell := orDash(cs.Status.ConsumersUpdated)
	moved, total := 0, 0
	for _, g := range cs.Spec.ConsumerGroups {
		total += len(g.Members)
	}
	if total == 0 {
		return cell
	}
	for _, c := range cs.Status.Consumers {
		if c.Kind == v1.KindGroup && c.SecretHash == cs.Status.SecretHash {
			moved += len(c.MembersUpdated)
		}
	}
	return fmt.Sprintf("%s members %d/%d", cell, moved, total)
}
