package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	mocov1beta2 "github.com/cybozu-go/moco/api/v1beta2"
	"github.com/cybozu-go/moco/clustering"
	"github.com/cybozu-go/moco/pkg/constants"
	"github.com/cybozu-go/moco/pkg/dbop"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StateAnnotation, on a MySQLCluster, makes the played clustering loop
// report that state (MOCO's state names: Degraded, Failed, ...) instead
// of the one it reads from the pods: the test's way to make MOCO see a
// sick cluster on demand.
const StateAnnotation = "moco-harness.rekey.io/state"

// playedClustering stands in for MOCO's ClusterManager. MOCO's loop asks
// every instance's moco-agent (gRPC) and mysqld for their state, decides
// the cluster's state, repairs replication and writes the MySQLCluster's
// Initialized, Available, Healthy and ClusteringActive conditions, which
// MOCO's partition controller gates each step of a rollout on and rekey
// reads.
//
// For a cluster with AddressesAnnotation the loop works on its mysqld as
// MOCO's does (process.go here: MOCO's password and dbop code, MOCO's
// own DecideState; what is played and why is said there and in
// mysqld.go). Without it, the state comes from the pods alone (every pod
// Ready and not being deleted: Healthy; the primary's Ready: Degraded;
// else Failed). Either way the conditions are written exactly as MOCO's
// process.go writes them.
type playedClustering struct {
	c client.Client
	// reader reads the MySQLCluster from the API server, not the cache, as
	// MOCO's loop does (a stale primary index would make two primaries).
	reader client.Reader
	log    logr.Logger
	ips    *podIPs
	dbf    dbop.OperatorFactory

	repoints, switchovers atomic.Int64

	mu     sync.Mutex
	active map[types.NamespacedName]bool
	states map[types.NamespacedName]string
}

var _ clustering.ClusterManager = &playedClustering{}

func newPlayedClustering(c client.Client, reader client.Reader, log logr.Logger) *playedClustering {
	ips := &podIPs{ips: map[string]string{}}
	return &playedClustering{c: c, reader: reader, log: log, ips: ips, dbf: dbop.NewFactory(ips),
		active: map[types.NamespacedName]bool{}, states: map[types.NamespacedName]string{}}
}

func (p *playedClustering) Update(key types.NamespacedName, _ string) { p.set(key, true) }

func (p *playedClustering) UpdateNoStart(key types.NamespacedName, _ string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.active[key]; ok {
		p.active[key] = true
	}
}

func (p *playedClustering) Stop(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.active, key)
}

func (p *playedClustering) StopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.active)
}

func (p *playedClustering) Pause(key types.NamespacedName) { p.set(key, false) }

func (p *playedClustering) set(key types.NamespacedName, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active[key] = on
}

// Start runs the loop: MOCO's default interval is 30 s, shortened here
// so that a test does not wait for it.
func (p *playedClustering) Start(ctx context.Context) error {
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		p.mu.Lock()
		var keys []types.NamespacedName
		for k, on := range p.active {
			if on {
				keys = append(keys, k)
			}
		}
		p.mu.Unlock()
		for _, k := range keys {
			if err := p.cycle(ctx, k); err != nil {
				p.log.Error(err, "clustering cycle", "cluster", k)
			}
		}
	}
}

func (p *playedClustering) state(ctx context.Context, cluster *mocov1beta2.MySQLCluster) (string, int, error) {
	var pods corev1.PodList
	if err := p.c.List(ctx, &pods, client.InNamespace(cluster.Namespace), client.MatchingLabels{
		constants.LabelAppName: constants.AppNameMySQL, constants.LabelAppInstance: cluster.Name, constants.LabelAppCreatedBy: constants.AppCreator,
	}); err != nil {
		return "", 0, err
	}
	ready, primaryReady := 0, false
	for i := range pods.Items {
		pod := &pods.Items[i]
		ok := pod.DeletionTimestamp == nil && podReady(pod)
		if ok {
			ready++
			if pod.Name == cluster.PodName(cluster.Status.CurrentPrimaryIndex) {
				primaryReady = true
			}
		}
	}
	if s := cluster.Annotations[StateAnnotation]; s != "" {
		return s, ready, nil
	}
	switch {
	case ready == int(cluster.Spec.Replicas) && len(pods.Items) == ready:
		return "Healthy", ready, nil
	case primaryReady:
		return "Degraded", ready, nil
	}
	return "Failed", ready, nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// cycle is one turn of MOCO's loop (clustering/process.go do): gather,
// write the conditions, then act on the instances.
func (p *playedClustering) cycle(ctx context.Context, key types.NamespacedName) error {
	cluster := &mocov1beta2.MySQLCluster{}
	if err := p.reader.Get(ctx, key, cluster); err != nil {
		return client.IgnoreNotFound(err)
	}
	if addresses(cluster) == nil {
		return p.writeStatus(ctx, key, nil)
	}
	in, err := p.gather(ctx, cluster)
	if err != nil {
		return err
	}
	defer in.close()
	p.mu.Lock()
	if st := in.ss.State.String(); p.states[key] != st {
		p.states[key] = st
		p.log.Info("cluster state is "+st, "cluster", key, "primary", in.ss.Primary)
	}
	p.mu.Unlock()
	if err := p.writeStatus(ctx, key, in); err != nil {
		return err
	}
	if cluster.Annotations[StateAnnotation] != "" {
		return nil // a state forced by the test: MOCO's view is not acted on
	}
	return p.operate(ctx, in)
}

// writeStatus writes the conditions as MOCO's clustering/process.go
// updateStatus does, with the state in decided (nil: from the pods).
func (p *playedClustering) writeStatus(ctx context.Context, key types.NamespacedName, in *instances) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cluster := &mocov1beta2.MySQLCluster{}
		if err := p.reader.Get(ctx, key, cluster); err != nil {
			return client.IgnoreNotFound(err)
		}
		st, synced, err := p.state(ctx, cluster)
		if err != nil {
			return err
		}
		orig := cluster.DeepCopy()
		if in != nil && cluster.Annotations[StateAnnotation] == "" {
			st = in.ss.State.String()
			cluster.Status.ErrantReplicas = len(in.ss.Errants)
			cluster.Status.ErrantReplicaList = in.ss.Errants
		}
		initialized, available, healthy := metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse
		switch st {
		case "Cloning", "Restoring":
			initialized = metav1.ConditionFalse
		case "Healthy":
			available, healthy = metav1.ConditionTrue, metav1.ConditionTrue
		case "Degraded":
			available = metav1.ConditionTrue
		}
		cond := func(typ string, val metav1.ConditionStatus) metav1.Condition {
			return metav1.Condition{Type: typ, Status: val, Reason: st, Message: "the current state is " + st}
		}
		meta.SetStatusCondition(&cluster.Status.Conditions, cond(mocov1beta2.ConditionInitialized, initialized))
		meta.SetStatusCondition(&cluster.Status.Conditions, cond(mocov1beta2.ConditionAvailable, available))
		meta.SetStatusCondition(&cluster.Status.Conditions, cond(mocov1beta2.ConditionHealthy, healthy))
		meta.SetStatusCondition(&cluster.Status.Conditions, metav1.Condition{Type: mocov1beta2.ConditionClusteringActive,
			Status: metav1.ConditionTrue, Reason: "ClusteringActive", Message: "clustering is active"})
		cluster.Status.SyncedReplicas = synced
		if equality.Semantic.DeepEqual(orig, cluster) {
			return nil
		}
		return p.c.Status().Update(ctx, cluster)
	})
}
