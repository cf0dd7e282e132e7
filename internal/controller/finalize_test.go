package controller

import (
	"context"
	"errors"
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
)

// windingDown records which wind-down a backend was asked for.
type windingDown struct {
	engine.Backend
	called string
	err    error
}

func (b *windingDown) Release(context.Context, engine.Secrets) error {
	b.called += "release "
	return b.err
}

// deprovisioning can also remove what rekey created.
type deprovisioning struct{ *windingDown }

func (b deprovisioning) Deprovision(context.Context, engine.Secrets) error {
	b.called += "deprovision "
	return b.err
}

// TestBackendWindDown: Delete deprovisions where the backend can, and
// releases otherwise; Discard only releases; a backend with neither is
// asked nothing.
func TestBackendWindDown(t *testing.T) {
	for _, c := range []struct {
		name   string
		depro  bool
		policy v1.DeletionPolicy
		want   string
	}{
		{"delete, deprovisioner", true, v1.DeletionDelete, "deprovision "},
		{"discard, deprovisioner", true, v1.DeletionDiscard, "release "},
		{"delete, releaser only", false, v1.DeletionDelete, "release "},
		{"discard, releaser only", false, v1.DeletionDiscard, "release "},
	} {
		w := &windingDown{err: errors.New("instance db-1 is unreachable")}
		var b engine.Backend = w
		if c.depro {
			b = deprovisioning{w}
		}
		if err := backendWindDown(context.Background(), b, c.policy, nil); err != w.err || w.called != c.want {
			t.Errorf("%s: called %q, returned %v; want %q and the backend's error", c.name, w.called, err, c.want)
		}
	}
	if err := backendWindDown(context.Background(), struct{ engine.Backend }{}, v1.DeletionDelete, nil); err != nil {
		t.Errorf("backend with neither: %v", err)
	}
}

func TestIsRekeyFinalizer(t *testing.T) {
	for f, want := range map[string]bool{
		naming.DeprovisionFinalizer:                             true,
		naming.ConsumerFinalizer(v1.KindDeployment, "a", "web"): true,
		naming.ConsumerFinalizer(v1.KindGroup, "", "nodes"):     true,
		"kubernetes.io/pvc-protection":                          false,
		"rekey.io/other":                                        false,
	} {
		if got := isRekeyFinalizer(f); got != want {
			t.Errorf("isRekeyFinalizer(%q) = %v, want %v", f, got, want)
		}
	}
}

// TestConsumerFinalizers: one finalizer per declared consumer (in the
// set's namespace unless it names another) and per group, each labelled
// with what a user can look up.
func TestConsumerFinalizers(t *testing.T) {
	cs := &v1.CredentialSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"}}
	cs.Spec.Consumers = []v1.ConsumerRef{{Kind: v1.KindDeployment, Name: "web"}, {Kind: v1.KindStatefulSet, Namespace: "jobs", Name: "worker"}}
	cs.Spec.ConsumerGroups = []v1.ConsumerGroup{{Name: "nodes"}}
	want := map[string]string{
		naming.ConsumerFinalizer(v1.KindDeployment, "shop", "web"):     "Deployment shop/web",
		naming.ConsumerFinalizer(v1.KindStatefulSet, "jobs", "worker"): "StatefulSet jobs/worker",
		naming.ConsumerFinalizer(v1.KindGroup, "", "nodes"):            "group nodes",
	}
	if got := consumerFinalizers(cs); !maps.Equal(got, want) {
		t.Errorf("consumerFinalizers = %v, want %v", got, want)
	}
	if got := consumerFinalizers(&v1.CredentialSet{}); len(got) != 0 {
		t.Errorf("no consumers: %v", got)
	}
}
