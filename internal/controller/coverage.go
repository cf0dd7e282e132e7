package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/engine"
	"rekey.io/rekey/internal/reason"
)

// secretHash names what the distribution Secrets hold when they serve
// generation gen: the generation and the rotation that produced it, never
// the secret material itself.
func secretHash(cs *v1.CredentialSet, gen int64) string {
	id := cs.Status.LastRotationID
	if gen != cs.Status.KeyGeneration && cs.Status.KeyGeneration != 0 {
		id = cs.Status.RotationID
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d/%s", setRef(cs), gen, id)))
	return hex.EncodeToString(sum[:])[:12]
}

// noteHash records what the distribution Secrets hold now; a change
// resets every consumer's coverage: a consumer that rolled out during the
// change may hold the old content.
func (r *Reconciler) noteHash(t *turn) {
	hash := secretHash(t.cs, r.servedGeneration(t.cs))
	known := t.known()
	if prev := known.SecretHash; prev != "" && prev != hash && len(known.Consumers) > 0 {
		r.event(t.cs, "Normal", reason.CoverageReset, "Coverage", "the distributed credentials changed (%s → %s): every consumer must move again", prev, hash)
	}
	t.obs.hash = hash
}

// previous finds a consumer's entry in the coverage last measured.
func previous(last []v1.ConsumerStatus, kind v1.ConsumerKind, ns, name string) *v1.ConsumerStatus {
	for i, c := range last {
		if c.Kind == kind && c.Namespace == ns && c.Name == name {
			return &last[i]
		}
	}
	return nil
}

// noteMoved records when a consumer was first seen moved for the current
// hash; a new hash starts over (a rollout during the change does not count).
func (r *Reconciler) noteMoved(cs *v1.CredentialSet, last []v1.ConsumerStatus, st *v1.ConsumerStatus, hash string) {
	st.SecretHash = hash
	if !st.RolledOut {
		return
	}
	if prev := previous(last, st.Kind, st.Namespace, st.Name); prev != nil && prev.SecretHash == hash && prev.MovedAt != nil {
		st.MovedAt = prev.MovedAt
		return
	}
	// Whole seconds, as the API server keeps it: the coverage this
	// reconcile carries after a status write then equals what was written,
	// and observe finds nothing to write again.
	now := metav1.NewTime(r.now().Truncate(time.Second))
	st.MovedAt = &now
	r.event(cs, "Normal", reason.ConsumerMoved, "Coverage", "%s %s moved to the current credentials (%s)", st.Kind, strings.TrimPrefix(st.Namespace+"/"+st.Name, "/"), hash)
}

// syncGroups folds acknowledgements into each group's coverage. Only acks
// for the current hash count; members acknowledged for an earlier
// distribution must be acknowledged again. known is the set's status as
// this reconcile knows it.
func (r *Reconciler) syncGroups(ctx context.Context, cs *v1.CredentialSet, known v1.CredentialSetStatus, hash string) []v1.ConsumerStatus {
	var out []v1.ConsumerStatus
	for _, g := range cs.Spec.ConsumerGroups {
		st := v1.ConsumerStatus{Kind: v1.KindGroup, Name: g.Name}
		var moved []string
		if prev := previous(known.Consumers, v1.KindGroup, "", g.Name); prev != nil && prev.SecretHash == hash {
			moved = append(moved, prev.MembersUpdated...)
		}
		key := engine.AckAnnotationPrefix + g.Name
		if v, ok := cs.Annotations[key]; ok {
			verdict, ackHash, members := engine.JudgeAck(v, hash, earlierHashes(cs, known, g.Name, hash))
			switch verdict {
			case engine.AckMalformed:
				r.event(cs, "Warning", reason.AckIgnored, "Coverage", "annotation %s is not <secretHash>:<member>,...; it was removed: acknowledge again with kubectl rekey ack", key)
				r.dropAck(ctx, cs, key)
			case engine.AckUnknownHash:
				r.event(cs, "Warning", reason.AckIgnored, "Coverage", "acknowledgement of group %s was for distribution %s, which this set never distributed (the Secrets now hold %s): acknowledge the hash of the set's own distribution Secrets", g.Name, ackHash, hash)
				r.dropAck(ctx, cs, key)
			case engine.AckSuperseded:
				// The last valid ack of an earlier distribution, left on
				// the set when this rotation changed the hash: expected,
				// not a mistake (no Warning). Its members must move again.
				logFrom(ctx).V(1).Info("acknowledgement of an earlier distribution removed", "group", g.Name, "ackHash", ackHash, "secretHash", hash)
				r.dropAck(ctx, cs, key)
			default:
				var unknown []string
				for _, m := range members {
					if !slices.Contains(g.Members, m) {
						unknown = append(unknown, m)
					} else if !slices.Contains(moved, m) {
						moved = append(moved, m)
					}
				}
				if len(unknown) > 0 {
					r.event(cs, "Warning", reason.AckIgnored, "Coverage", "group %s has no members %s; they were not counted: fix the names, or add them to spec.consumerGroups", g.Name, summarize(unknown, "names", "the acknowledgement annotation"))
				}
			}
		}
		slices.Sort(moved)
		st.MembersUpdated = moved
		st.Coverage = fmt.Sprintf("%d/%d", len(moved), len(g.Members))
		st.RolledOut = len(moved) == len(g.Members)
		if !st.RolledOut {
			st.Message = fmt.Sprintf("%s members updated; waiting for %s", st.Coverage, strings.Join(missingMembers(g.Members, moved), ", "))
		}
		r.noteMoved(cs, known.Consumers, &st, hash)
		out = append(out, st)
	}
	return out
}

// earlierHashes names the distributions of cs before the one whose hash is
// current that the set can still identify: what the Secrets held at the
// current keyGeneration (while a rotation is Distributed, the previous
// rotation's distribution), what the last written status recorded, and
// what group's coverage was last counted for (after a rollback, the
// rolled-back distribution).
func earlierHashes(cs *v1.CredentialSet, known v1.CredentialSetStatus, group, current string) []string {
	var out []string
	add := func(h string) {
		if h != "" && h != current && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	if cs.Status.KeyGeneration > 0 {
		add(secretHash(cs, cs.Status.KeyGeneration))
	}
	add(known.SecretHash)
	if prev := previous(known.Consumers, v1.KindGroup, "", group); prev != nil {
		add(prev.SecretHash)
	}
	return out
}

func missingMembers(all, moved []string) []string {
	var out []string
	for _, m := range all {
		if !slices.Contains(moved, m) {
			if len(out) == 5 {
				// A sixth exists: say there are more.
				return append(out, "…")
			}
			out = append(out, m)
		}
	}
	return out
}

// dropAck removes an acknowledgement only if the set did not change since
// it was read: a batch recorded meanwhile is never lost.
func (r *Reconciler) dropAck(ctx context.Context, cs *v1.CredentialSet, key string) {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": cs.ResourceVersion, "annotations": map[string]any{key: nil}}})
	if err := r.Client.Patch(ctx, cs.DeepCopy(), client.RawPatch(types.MergePatchType, body)); err != nil {
		logFrom(ctx).Info("stale acknowledgement not removed; retried next reconcile", "annotation", key, "error", err.Error())
	}
}

// scopeMoved says what retiring this set's old credentials waits for
// (status.retirementWaitsFor), for backends whose old identity is shared
// state of a cluster, and identifies that cluster (status.cluster; "" when
// it cannot be). It returns a problem when the cluster cannot be
// identified: then nothing may be retired, rather than risk retiring a user
// another set still serves. known is the set's status as this reconcile
// knows it, its consumers' coverage measured.
//
// A cluster-wide wait (every set on the cluster moved) would only be needed
// if sets shared one user. In rekey, retirement waits for exactly the consumers that can hold
// the retiring user: this set's own. Other sets on the same cluster hold
// users of their own (rabbitkube refuses two sets making the same
// users on one cluster), so one stuck set never holds back another set's
// retirement. The one user several sets can share, an adopted one, carries
// a mark per set; retiring it removes only this set's mark while another
// set holds it, and the last one deletes it: a finalizer per user, kept
// per set instead of behind a cluster-wide wait.
func scopeMoved(ctx context.Context, p *plan, known v1.CredentialSetStatus) (cluster string, waiting []string, prob *problem) {
	sc, ok := p.backend.(engine.Scoped)
	if !ok {
		return "", nil, nil
	}
	id, cerr := sc.ClusterID(ctx)
	if cerr != nil || id == "" {
		return "", nil, &problem{reason.ClusterUnidentified, fmt.Sprintf(
			"the backend cluster cannot be identified (%v), so no old credentials are retired: check the endpoint and the admin's permission to read the cluster overview", cerr)}
	}
	if known.Phase != v1.PhaseDistributed || known.DiscardApplied || known.ResetPending {
		return id, nil, nil // nothing is being retired
	}
	for _, c := range known.Consumers {
		if !c.RolledOut {
			waiting = append(waiting, fmt.Sprintf("%s %s: %s", c.Kind, strings.TrimPrefix(c.Namespace+"/"+c.Name, "/"), c.Message))
		}
	}
	return id, waiting, nil
}
