package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1.AddToScheme(s))
	return s
}()

// session is one command's connection: a client (which can also watch, for
// --wait) and the namespace in use.
type session struct {
	c    client.WithWatch
	ns   string
	opts Options
}

// session connects as kubectl would with the same global flags
// (genericclioptions.ConfigFlags: --kubeconfig, --context, --as, --token,
// --request-timeout, ...).
func (a *app) session() (*session, error) {
	cfg, err := a.restConfig()
	if err != nil {
		return nil, fmt.Errorf("no usable kubeconfig (%v): pass --kubeconfig, set KUBECONFIG, or pick a context with --context", err)
	}
	ns, _, err := a.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("namespace from kubeconfig: %w: pass -n NAMESPACE", err)
	}
	cfg.UserAgent = "kubectl-rekey/" + versionString()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	return &session{c: c, ns: ns, opts: a.opts}, nil
}

// FieldManager owns the annotations the plugin writes. Not a name that
// starts with "kubectl": Flux's kustomize-controller takes over the fields
// of every such manager before each sync (to undo manual kubectl edits),
// which would remove a pending request the plugin made.
const FieldManager = "rekey-plugin"

// restConfig is ConfigFlags' configuration, except that no configuration
// at all is an error: kubectl would fall back to http://localhost:8080,
// which only ever answers "connection refused".
func (a *app) restConfig() (*rest.Config, error) {
	raw, err := a.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, err
	}
	noServer := a.flags.APIServer == nil || *a.flags.APIServer == ""
	inCluster := os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != ""
	if len(raw.Clusters) == 0 && len(raw.Contexts) == 0 && noServer && !inCluster {
		return nil, clientcmd.ErrEmptyConfig
	}
	return a.flags.ToRESTConfig()
}

var errNoAPI = errors.New("this cluster does not serve rekey.io/v1alpha1 CredentialSets: install rekey's CRD (config/crd) and operator first")

func (s *session) getSet(ctx context.Context, name string) (*v1.CredentialSet, error) {
	cs := &v1.CredentialSet{}
	err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, cs)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("credentialset %q not found in namespace %q: list the sets there with kubectl rekey status -n %s", name, s.ns, s.ns)
	case meta.IsNoMatchError(err):
		return nil, errNoAPI
	case err != nil:
		return nil, fmt.Errorf("read credentialset %s/%s: %w", s.ns, name, denied(err, readSets, s.ns))
	}
	return cs, nil
}

func (s *session) listSets(ctx context.Context) ([]v1.CredentialSet, error) {
	l := &v1.CredentialSetList{}
	err := s.c.List(ctx, l, client.InNamespace(s.ns))
	if meta.IsNoMatchError(err) {
		return nil, errNoAPI
	}
	if err != nil {
		return nil, fmt.Errorf("list credentialsets in %s: %w", s.ns, denied(err, readSets, s.ns))
	}
	return l.Items, nil
}

// annotate writes one annotation with a JSON merge patch, as `kubectl
// annotate` does. The resourceVersion in the patch makes it conditional:
// the phase checked before writing is still the phase when it lands. A
// refusal because the set changed is an errChanged, which request retries.
func (s *session) annotate(ctx context.Context, cs *v1.CredentialSet, key, value string) error {
	if raceBeforeRequest != nil {
		raceBeforeRequest(cs)
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": cs.ResourceVersion,
		"annotations":     map[string]string{key: value},
	}})
	if err != nil {
		return err
	}
	err = s.c.Patch(ctx, cs, client.RawPatch(types.MergePatchType, body), client.FieldOwner(FieldManager))
	switch {
	case apierrors.IsConflict(err):
		return &errChanged{ns: s.ns, name: cs.Name, err: err}
	case err != nil:
		return fmt.Errorf("annotate credentialset %s/%s with %s: %w", s.ns, cs.Name, key, denied(err, patchSets, s.ns))
	}
	return nil
}

// raceBeforeRequest, set by tests only, runs between the read of a set and
// the request written on it: where the operator's status writes land.
var raceBeforeRequest func(*v1.CredentialSet)

// errChanged: a conditional write refused because the set changed after
// it was read. It unwraps to the API server's conflict.
type errChanged struct {
	ns, name string
	err      error
}

func (e *errChanged) Error() string {
	return fmt.Sprintf("credentialset %s kept changing while kubectl rekey checked it (the operator may have moved on): check kubectl rekey status %s, then run the command again", e.ns+"/"+e.name, e.name)
}

func (e *errChanged) Unwrap() error { return e.err }

// changedBackoff: how often a request is tried again on a fresh read. The
// operator writes a set's status several times within a second while it
// moves (a transition, then what it observed), so a user's command must
// outlast such a burst rather than fail on it.
var changedBackoff = wait.Backoff{Steps: 6, Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.2}

// request runs attempt — read the set, check it, write the request
// conditionally on that read — until a write lands or attempt fails for
// another reason. A set that changed in between is read and checked
// again: the check, not the first read, decides.
func (s *session) request(attempt func() error) error {
	return retry.OnError(changedBackoff, func(err error) bool {
		var c *errChanged
		return errors.As(err, &c)
	}, attempt)
}

// stepRequest is a request on the active rotation as it landed: the set as
// read for it, the rotation, the Events before it, and whether the same
// request was there already (then nothing was written).
type stepRequest struct {
	cs      *v1.CredentialSet
	id      string
	seen    baseline
	already bool
}

// requestRotationStep asks the operator for a step of the active rotation
// (discard, abort): which rotation, if any, is the check's answer on the
// read the request is written on.
func (s *session) requestRotationStep(ctx context.Context, name string, check func(*v1.CredentialSet) (string, error), key string) (stepRequest, error) {
	var r stepRequest
	err := s.request(func() (err error) {
		if r.cs, err = s.getSet(ctx, name); err != nil {
			return err
		}
		if r.id, err = check(r.cs); err != nil {
			return err
		}
		evs, err := s.listEvents(ctx, name)
		if err != nil {
			return err
		}
		r.seen = newBaseline(eventsAbout(evs, r.cs))
		if r.already = r.cs.Annotations[key] == r.id; r.already {
			return nil
		}
		return s.annotate(ctx, r.cs, key, r.id)
	})
	return r, err
}

// setRef is how output names a set: namespace/name.
func setRef(cs *v1.CredentialSet) string { return cs.Namespace + "/" + cs.Name }
