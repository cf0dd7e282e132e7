package e2e

import (
	"fmt"
	"strings"
	"testing"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/naming"
	"rekey.io/rekey/internal/plugin"
	"rekey.io/rekey/internal/testenv"
)

// The field managers the GitOps tools write with. Both force: Argo CD with
// ServerSideApply=true applies with --force-conflicts, Flux's
// kustomize-controller always takes the fields its manifests hold.
const (
	argoManager   = "argocd-controller"
	pluginManager = plugin.FieldManager
	// kubectlManager stands for a manual kubectl edit.
	kubectlManager = "kubectl-edit"
)

// TestGitOps plays what Argo CD and Flux do, on a control plane where
// Deployments really roll out and a real mysqld: the CredentialSet and its
// consumer Deployment live in git and reach the API server only by
// server-side apply under the tool's field manager. A rotation is a commit
// raising rotation.keyGeneration, the discard a commit raising
// rotation.discardGeneration; between them the tool re-applies the
// unchanged manifests (its periodic sync), which must neither undo rekey's
// restart annotation nor restart the consumer again. A full replace (kubectl
// replace, Argo CD's Replace=true) does remove the annotation: the test
// counts what that costs and checks it stays bounded, and that the plugin's
// rotate and discard requests survive a sync.
func TestGitOps(t *testing.T) {
	c := matrixCluster(t, testenv.MySQLOptions{NoReplicas: true})
	startManager(t, cp.Config)
	ns := newNamespace(t)
	g := newGitRepo(t, ns, "shop", c)
	keys := map[string]string{"SHOP_PASSWORD": "shop"}

	g.sync(1, 0)
	pc := startPodConsumers(t, k8s, cp, ns, g.app, keys, c.Instances)
	registerConsumers(t, pc)
	cs := waitPhase(t, ns, g.name, v1.PhaseIdle, 1)
	gen1 := userPasswords(sourceData(t, cs), keys, "")
	annKey := naming.RestartAnnotation(cs)
	g.waitRolledOut()

	// The rotation: a commit raising keyGeneration, synced.
	g.sync(2, 0)
	cs = waitPhase(t, ns, g.name, v1.PhaseDistributed, 1)
	gen2 := userPasswords(sourceData(t, cs), keys, engine.PendingSuffix)
	restart := engine.RestartValue(cs.Status)
	if restart == "" {
		t.Fatalf("no restart value in Distributed: %s", stateOf(cs))
	}
	d := g.waitRestartedWith(annKey, restart)
	if owner := fieldOwner(d, annKey); owner == "" || owner == argoManager {
		t.Fatalf("restart annotation %s owned by %q, want rekey's own field manager", annKey, owner)
	} else {
		t.Logf("restart annotation %s=%s owned by field manager %q", annKey, restart, owner)
	}

	// The periodic sync of unchanged manifests while Distributed.
	g.assertSyncChangesNothing("Argo CD's periodic sync while Distributed", g.sync, 2, 0, annKey, restart, pc)
	g.assertSyncChangesNothing("Flux's periodic sync while Distributed", g.fluxSync, 2, 0, annKey, restart, pc)

	// The discard: a commit raising discardGeneration, synced — by Flux
	// here, to show its field manager triggers as Argo CD's does.
	g.fluxSync(2, 2)
	cs = waitPhase(t, ns, g.name, v1.PhaseIdle, 2)
	loginMatrix(t, "after discardGeneration 2", c.Instances(), gen2, gen1)
	if got := g.deployment().Spec.Template.Annotations[annKey]; got != restart {
		t.Fatalf("the discard changed the restart annotation: %q, want %q", got, restart)
	}
	g.assertSyncChangesNothing("Argo CD's periodic sync while Idle", g.sync, 2, 2, annKey, restart, pc)
	g.assertSyncChangesNothing("Flux's periodic sync while Idle", g.fluxSync, 2, 2, annKey, restart, pc)

	// A full replace of the Deployment: what kubectl replace and Argo CD's
	// Replace=true send. It drops the annotation (a PUT keeps no field it
	// does not carry), so each replace costs one rollout, and rekey's
	// restoring the annotation a second: bounded per sync, no loop by
	// itself.
	const replaces = 3
	var perReplace []string
	for i := 1; i <= replaces; i++ {
		before, starts := revision(g.deployment()), pc.starts.Load()
		g.replace(nil)
		d = g.waitRestartedWith(annKey, restart)
		rollouts, podStarts := revision(d)-before, pc.starts.Load()-starts
		perReplace = append(perReplace, fmt.Sprintf("replace %d: %d rollouts, %d pod starts", i, rollouts, podStarts))
		if rollouts > 2 {
			t.Fatalf("replace %d: %d rollouts, want at most 2 (the replace's, and rekey's restoring the annotation)", i, rollouts)
		}
		if podStarts > rollouts*consumerReplicas {
			t.Fatalf("replace %d: %d pod starts for %d rollouts of %d replicas", i, podStarts, rollouts, consumerReplicas)
		}
	}
	t.Logf("full replace without the annotation: %s", strings.Join(perReplace, "; "))
	// No loop: once the annotation is back, rekey reconciling again (woken
	// by a touch of the set) changes the Deployment no more.
	settled, starts := g.deployment(), pc.starts.Load()
	annotate(t, ns, g.name, "test.rekey.io/touch", "after-replace")
	waitObserved(t, ns, g.name)
	d = g.waitRestartedWith(annKey, restart)
	if d.Generation != settled.Generation || revision(d) != revision(settled) || pc.starts.Load() != starts {
		t.Fatalf("the Deployment moved with no sync (generation %d → %d, revision %d → %d, %d pod starts): a loop",
			settled.Generation, d.Generation, revision(settled), revision(d), pc.starts.Load()-starts)
	}

	// A replace that carries the live value of the annotation (what Argo
	// CD's RespectIgnoreDifferences=true does with an ignored field)
	// restarts nothing.
	before, starts := revision(g.deployment()), pc.starts.Load()
	g.replace(map[string]string{annKey: restart})
	waitObserved(t, ns, g.name)
	d = g.waitRestartedWith(annKey, restart)
	if revision(d) != before || pc.starts.Load() != starts {
		t.Fatalf("replace with the live annotation: revision %d → %d, %d pod starts; want no rollout",
			before, revision(d), pc.starts.Load()-starts)
	}

	// kubectl rekey's requests are not in git. What a sync does to them
	// is the field managers' business, shown on a marker the plugin's
	// manager writes and rekey never consumes (rekey drops its rotate and
	// discard requests itself once acted on, which would race the check).
	g.pluginAnnotate(pluginMarker, "1")
	g.sync(2, 2)
	if got := getSet(t, ns, g.name).Annotations[pluginMarker]; got != "1" {
		t.Fatalf("a server-side apply of the manifest removed an annotation the plugin wrote: %q", got)
	}
	// Flux's kustomize-controller first takes over the fields of managers
	// whose name starts with "kubectl" (a manual edit's), then applies: such
	// an annotation is then its own, and not in git, so it goes. The
	// plugin's manager is not one of them: its pending requests stay.
	g.annotateAs(kubectlManager, kubectlMarker, "1")
	g.fluxSync(2, 2)
	set := getSet(t, ns, g.name)
	if got, ok := set.Annotations[kubectlMarker]; ok {
		t.Fatalf("a Flux-style sync kept an annotation a manual kubectl edit wrote (%q): the takeover was not played", got)
	}
	if got := set.Annotations[pluginMarker]; got != "1" {
		t.Fatalf("a Flux-style sync removed the plugin's annotation (%q): its field manager %s must not be taken over", got, pluginManager)
	}
	if got := g.deployment().Spec.Template.Annotations[annKey]; got != restart {
		t.Fatalf("a Flux-style sync changed rekey's restart annotation: %q, want %q", got, restart)
	}
	t.Logf("an annotation written by field manager %s: kept by a server-side apply and by a Flux-style sync (which removed %s's)", pluginManager, kubectlManager)

	// The plugin's requests between Argo-style syncs still rotate and
	// discard.
	g.pluginAnnotate(engine.RotateAnnotation, "by-hand-3")
	g.sync(2, 2)
	cs = waitPhase(t, ns, g.name, v1.PhaseDistributed, 2)
	if cs.Status.RotationID != "by-hand-3" {
		t.Fatalf("rotation %q, want by-hand-3", cs.Status.RotationID)
	}
	gen3 := userPasswords(sourceData(t, cs), keys, engine.PendingSuffix)
	g.waitRestartedWith(annKey, engine.RestartValue(cs.Status))
	g.pluginAnnotate(engine.DiscardAnnotation, "by-hand-3")
	g.sync(2, 2)
	waitPhase(t, ns, g.name, v1.PhaseIdle, 3)
	loginMatrix(t, "after the plugin's discard", c.Instances(), gen3, gen2)
}

// pluginMarker stands for the plugin's requests in the field-manager check.
const (
	pluginMarker  = "test.rekey.io/by-plugin"
	kubectlMarker = "test.rekey.io/by-kubectl-edit"
)
