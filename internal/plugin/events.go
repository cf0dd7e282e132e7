package plugin

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// listEvents lists the Events (events.k8s.io/v1, which also shows Events
// written through core/v1) regarding CredentialSets in the namespace, or
// only the set name when given. The server filters by kind and name; about
// checks the rest.
func (s *session) listEvents(ctx context.Context, name string) ([]eventsv1.Event, error) {
	evs, _, err := s.listEventsRV(ctx, name)
	return evs, err
}

// listEventsRV is listEvents with the list's resourceVersion, to watch from.
// With an empty s.ns (-A) it lists every namespace.
func (s *session) listEventsRV(ctx context.Context, name string) ([]eventsv1.Event, string, error) {
	l := &eventsv1.EventList{}
	if err := s.c.List(ctx, l, client.InNamespace(s.ns), client.MatchingFieldsSelector{Selector: eventSelector(name)}); err != nil {
		if s.ns == "" {
			return nil, "", fmt.Errorf("list events in all namespaces: %w", denied(err, readEvents, ""))
		}
		return nil, "", fmt.Errorf("list events in %s: %w", s.ns, denied(err, readEvents, s.ns))
	}
	return l.Items, l.ResourceVersion, nil
}

// eventSelector selects the Events regarding CredentialSets, or the set
// name when given.
func eventSelector(name string) fields.Selector {
	sel := fields.Set{"regarding.kind": "CredentialSet"}
	if name != "" {
		sel["regarding.name"] = name
	}
	return sel.AsSelector()
}

// about says whether e regards cs: same kind, name and namespace (the
// Event's own: -A lists several), and the same UID when
// the Event has one, so a deleted namesake's Events are not mixed in.
func about(e *eventsv1.Event, cs *v1.CredentialSet) bool {
	r := e.Regarding
	if r.Kind != "CredentialSet" || r.Name != cs.Name || (e.Namespace != "" && cs.Namespace != "" && e.Namespace != cs.Namespace) {
		return false
	}
	if r.APIVersion != "" && !strings.HasPrefix(r.APIVersion, v1.GroupVersion.Group+"/") {
		return false
	}
	return r.UID == "" || cs.UID == "" || r.UID == cs.UID
}

// eventTime is when e last happened: a series' last observation, the
// event time, or the core/v1 timestamps of older writers.
func eventTime(e *eventsv1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// eventsAbout returns the Events regarding cs, oldest first.
func eventsAbout(all []eventsv1.Event, cs *v1.CredentialSet) []eventsv1.Event {
	var out []eventsv1.Event
	for i := range all {
		if about(&all[i], cs) {
			out = append(out, all[i])
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(&out[i]).Before(eventTime(&out[j])) })
	return out
}

// baseline is the Events seen before a request was written, by name and
// resourceVersion: what --wait follows is only what changes after it. This
// needs no clock agreement between this machine and the operator's.
type baseline map[string]string

func newBaseline(evs []eventsv1.Event) baseline {
	b := baseline{}
	b.add(evs)
	return b
}

func (b baseline) add(evs []eventsv1.Event) {
	for _, e := range evs {
		b[e.Name] = e.ResourceVersion
	}
}

// fresh returns the Events new or updated (a series repeating) since b.
func (b baseline) fresh(evs []eventsv1.Event) []eventsv1.Event {
	var out []eventsv1.Event
	for _, e := range evs {
		if rv, ok := b[e.Name]; !ok || rv != e.ResourceVersion {
			out = append(out, e)
		}
	}
	return out
}
