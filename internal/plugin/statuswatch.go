package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// readSets reads set name, or the sets sel selects (all when nil), with
// the resourceVersion -w watches from.
func (s *session) readSets(ctx context.Context, name string, sel labels.Selector) ([]v1.CredentialSet, string, error) {
	if name != "" {
		cs, err := s.getSet(ctx, name)
		if err != nil {
			return nil, "", err
		}
		return []v1.CredentialSet{*cs}, cs.ResourceVersion, nil
	}
	l := &v1.CredentialSetList{}
	opts := []client.ListOption{client.InNamespace(s.ns)}
	if sel != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	err := s.c.List(ctx, l, opts...)
	if meta.IsNoMatchError(err) {
		return nil, "", errNoAPI
	}
	if err != nil {
		where := s.ns
		if where == "" {
			where = "all namespaces"
		}
		return nil, "", fmt.Errorf("list credentialsets in %s: %w", where, denied(err, readSets, s.ns))
	}
	return l.Items, l.ResourceVersion, nil
}

// watchSets is -w: from resourceVersion rv on, each set that changes is
// printed again (a row; the object with -o json, yaml, ...), until ctx
// ends. The watch resumes by itself when the server ends it.
func (s *session) watchSets(ctx context.Context, w io.Writer, name, rv string, out statusOutput) error {
	lw := s.setsListWatch(name, out.sel)
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, lw)
	if err != nil {
		return err
	}
	defer rw.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-rw.ResultChan():
			if !ok {
				return nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
			case watch.Error:
				if st := apierrors.FromObject(ev.Object); st != nil {
					return fmt.Errorf("watching credentialsets: %w", denied(st, readSets, s.ns))
				}
				continue
			default:
				continue
			}
			cs, ok := ev.Object.(*v1.CredentialSet)
			if !ok {
				continue
			}
			if err := s.printSets(ctx, w, []v1.CredentialSet{*cs}, name, out, false); err != nil {
				if errors.Is(err, context.Canceled) {
					return nil
				}
				return err
			}
		}
	}
}

// setsListWatch watches CredentialSets in the session's namespace (all
// with -A), by name or label selector.
func (s *session) setsListWatch(name string, sel labels.Selector) *cache.ListWatch {
	return &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, raw metav1.ListOptions) (watch.Interface, error) {
		opts := []client.ListOption{client.InNamespace(s.ns), &client.ListOptions{Raw: &raw}}
		if name != "" {
			opts = append(opts, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
		}
		if sel != nil {
			opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
		}
		return s.c.Watch(ctx, &v1.CredentialSetList{}, opts...)
	}}
}

// setObjects are sets as objects for a printer.
func setObjects(sets []v1.CredentialSet) []runtime.Object {
	objs := make([]runtime.Object, len(sets))
	for i := range sets {
		objs[i] = &sets[i]
	}
	return objs
}
