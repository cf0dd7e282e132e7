package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	mocov1beta2 "github.com/cybozu-go/moco/api/v1beta2"
	"github.com/cybozu-go/moco/clustering"
	"github.com/cybozu-go/moco/pkg/constants"
	"github.com/cybozu-go/moco/pkg/dbop"
	"github.com/cybozu-go/moco/pkg/password"
	"github.com/jmoiron/sqlx"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// instances is what one cycle holds: MOCO's StatusSet (its own type,
// decided by its own DecideState) and, beside MOCO's operators, the
// connections the played statements use.
type instances struct {
	ss  *clustering.StatusSet
	dbs []*sqlx.DB
}

func (in *instances) close() {
	in.ss.Close()
	for _, db := range in.dbs {
		if db != nil {
			_ = db.Close()
		}
	}
}

// gather plays MOCO's GatherStatus (clustering/status.go): the user
// Secret parsed with MOCO's password.NewMySQLPasswordFromSecret, the
// pods, one operator per instance from MOCO's dbop.NewFactory, each
// instance's status (getStatus, played), errant replicas found with
// MOCO's SubtractGTID; then MOCO's own StatusSet.DecideState. Not
// played: the status retries (2 × 3 s) before an instance counts as
// down, the replication-delay check (no maxDelaySecondsForPodDeletion
// here) and the semi-sync hang-up check.
func (p *playedClustering) gather(ctx context.Context, cluster *mocov1beta2.MySQLCluster) (*instances, error) {
	ss := &clustering.StatusSet{Cluster: cluster, Primary: cluster.Status.CurrentPrimaryIndex}
	secret := &corev1.Secret{}
	if err := p.c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.UserSecretName()}, secret); err != nil {
		return nil, fmt.Errorf("failed to get password secret: %w", err)
	}
	pwd, err := password.NewMySQLPasswordFromSecret(secret)
	if err != nil {
		return nil, err
	}
	ss.Password = pwd
	var pods corev1.PodList
	if err := p.c.List(ctx, &pods, client.InNamespace(cluster.Namespace), client.MatchingLabels{
		constants.LabelAppName: constants.AppNameMySQL, constants.LabelAppInstance: cluster.Name,
	}); err != nil {
		return nil, err
	}
	n := int(cluster.Spec.Replicas)
	if len(pods.Items) != n {
		return nil, fmt.Errorf("too few pods; only %d pods exist", len(pods.Items))
	}
	ss.Pods = make([]*corev1.Pod, n)
	for i := range pods.Items {
		f := strings.Split(pods.Items[i].Name, "-")
		idx, err := strconv.Atoi(f[len(f)-1])
		if err != nil || idx < 0 || idx >= n {
			return nil, fmt.Errorf("bad pod name: %s", pods.Items[i].Name)
		}
		ss.Pods[idx] = &pods.Items[i]
	}
	if t, err := strconv.Atoi(cluster.Annotations[TerminatingAnnotation]); err == nil && t >= 0 && t < n {
		// The played preStop (see TerminatingAnnotation).
		pod := ss.Pods[t].DeepCopy()
		now := metav1.Now()
		pod.DeletionTimestamp = &now
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		ss.Pods[t] = pod
	}

	in := &instances{ss: ss, dbs: make([]*sqlx.DB, n)}
	ss.DBOps = make([]dbop.Operator, n)
	ss.MySQLStatus = make([]*dbop.MySQLInstanceStatus, n)
	for i := 0; i < n; i++ {
		if ss.DBOps[i], err = p.dbf.New(ctx, cluster, pwd, i); err != nil {
			in.close()
			return nil, err
		}
		if ip, err := p.ips.Resolve(ctx, cluster, i); err == nil {
			in.dbs[i], _ = adminDB(ip, pwd)
		}
	}
	uuids := make([]string, n)
	for i, db := range in.dbs {
		if db != nil {
			_ = db.GetContext(ctx, &uuids[i], "SELECT @@server_uuid")
		}
	}
	var wg sync.WaitGroup
	for i, db := range in.dbs {
		if db == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ist, err := getStatus(ctx, db, cluster, uuids)
			if err != nil {
				p.log.Info("failed to get mysqld status, mysqld is not ready", "instance", i, "error", err.Error())
				return
			}
			ss.MySQLStatus[i] = ist
		}()
	}
	wg.Wait()
	if pst := ss.MySQLStatus[ss.Primary]; pst != nil {
		ss.ExecutedGTID = pst.GlobalVariables.ExecutedGTID
		for i, ist := range ss.MySQLStatus {
			if i == ss.Primary || ist == nil {
				continue
			}
			diff, err := ss.DBOps[ss.Primary].SubtractGTID(ctx, ist.GlobalVariables.ExecutedGTID, ss.ExecutedGTID)
			if err != nil {
				in.close()
				return nil, fmt.Errorf("failed to compare GTID for instance %d: %w", i, err)
			}
			if errant(pst.GlobalVariables.UUID, diff) {
				ist.IsErrant = true
				ss.Errants = append(ss.Errants, i)
			}
		}
	}
	ss.DecideState()
	return in, nil
}

// errant is MOCO's containErrantTransactions (unexported there).
func errant(primaryUUID, gtidSet string) bool {
	if gtidSet == "" {
		return false
	}
	for _, s := range strings.Split(gtidSet, ",") {
		if strings.SplitN(strings.TrimSpace(s), ":", 2)[0] != primaryUUID {
			return true
		}
	}
	return false
}

// operate plays MOCO's managerProcess.do after its status update: a
// switchover when the primary is to be switched, configure when the
// cluster is Degraded or Incomplete. A failover (Failed) is not played:
// the test's primary stops only after MOCO switched it over (the played
// preStop), so there is none to make.
func (p *playedClustering) operate(ctx context.Context, in *instances) error {
	ss := in.ss
	switch ss.State {
	case clustering.StateHealthy, clustering.StateDegraded:
		if ss.NeedSwitch {
			return p.switchover(ctx, in)
		}
		if ss.State == clustering.StateDegraded {
			return p.configure(ctx, in)
		}
	case clustering.StateIncomplete:
		return p.configure(ctx, in)
	case clustering.StateFailed:
		p.log.Info("the cluster is Failed: MOCO would fail over; not played")
	}
	return nil
}

// switchover is MOCO's (clustering/operations.go), on MOCO's operators:
// the primary made super_read_only (SetReadOnly), connections killed
// (KillConnections), the candidate waits for the primary's executed GTID
// set (WaitForGTID, 50 s), status.currentPrimaryIndex set to the
// candidate, the demote annotation removed. Played: the primary's GTID
// set is read with getStatus, and SetReadOnly is not raced against
// MOCO's 10 s timeout.
func (p *playedClustering) switchover(ctx context.Context, in *instances) error {
	ss := in.ss
	start := time.Now()
	p.log.Info("begin switchover the primary", "current", ss.Primary, "next", ss.Candidate)
	pdb := ss.DBOps[ss.Primary]
	if err := pdb.SetReadOnly(ctx, true); err != nil {
		if kerr := pdb.KillConnections(ctx); kerr != nil {
			return fmt.Errorf("failed to make instance %d read-only: %w, and failed to kill connections: %w", ss.Primary, err, kerr)
		}
		return fmt.Errorf("failed to make instance %d read-only: %w", ss.Primary, err)
	}
	time.Sleep(100 * time.Millisecond) // MOCO's
	if err := pdb.KillConnections(ctx); err != nil {
		return fmt.Errorf("failed to kill connections in instance %d: %w", ss.Primary, err)
	}
	pst, err := getStatus(ctx, in.dbs[ss.Primary], ss.Cluster, nil)
	if err != nil {
		return fmt.Errorf("failed to get the primary status: %w", err)
	}
	if err := ss.DBOps[ss.Candidate].WaitForGTID(ctx, pst.GlobalVariables.ExecutedGTID, 50); err != nil {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cluster := &mocov1beta2.MySQLCluster{}
		if err := p.reader.Get(ctx, client.ObjectKeyFromObject(ss.Cluster), cluster); err != nil {
			return err
		}
		cluster.Status.CurrentPrimaryIndex = ss.Candidate
		return p.c.Status().Update(ctx, cluster)
	})
	if err != nil {
		return fmt.Errorf("failed to set the current primary index: %w", err)
	}
	ppod := ss.Pods[ss.Primary]
	if _, ok := ppod.Annotations[constants.AnnDemote]; ok && ppod.DeletionTimestamp == nil {
		newPod := ppod.DeepCopy()
		delete(newPod.Annotations, constants.AnnDemote)
		if err := p.c.Patch(ctx, newPod, client.MergeFrom(ppod)); err != nil {
			return fmt.Errorf("failed to remove moco.cybozu.com/demote annotation: %w", err)
		}
	}
	p.switchovers.Add(1)
	p.log.Info("switchover finished", "primary", ss.Candidate, "took", time.Since(start).String())
	return nil
}

// configure is MOCO's configure for a cluster without a replication
// source (clustering/operations.go): the primary's replica IO thread
// stopped and its retrieved transactions applied, every replica made
// super_read_only and pointed at the primary when its replication does
// not run or points elsewhere, then the primary made writable. MOCO's
// operators run SetReadOnly, KillConnections, StopReplicaIOThread,
// WaitForGTID and SubtractGTID; ConfigureReplica is played (see
// configureReplica). Not played: the role labels on the pods (for MOCO's
// Services; nothing here routes by them), semi-sync on the primary
// (ConfigurePrimary: no plugin in MySQL 9), and a replica's semi-sync
// setting as a reason to re-point (the played status reports it off).
func (p *playedClustering) configure(ctx context.Context, in *instances) error {
	ss := in.ss
	pst, op := ss.MySQLStatus[ss.Primary], ss.DBOps[ss.Primary]
	if pst == nil {
		return nil
	}
	if pst.ReplicaStatus != nil && pst.ReplicaStatus.ReplicaIORunning == "Yes" {
		if err := op.StopReplicaIOThread(ctx); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond) // MOCO's
	}
	if pst.ReplicaStatus != nil && pst.ReplicaStatus.RetrievedGtidSet != "" {
		if err := op.WaitForGTID(ctx, pst.ReplicaStatus.RetrievedGtidSet, 0); err != nil {
			return err
		}
	}
	for i, st := range ss.MySQLStatus {
		if i == ss.Primary || st == nil {
			continue
		}
		if err := p.configureReplicaAt(ctx, in, i); err != nil {
			return fmt.Errorf("failed to configure replica instance %d: %w", i, err)
		}
	}
	if pst.GlobalVariables.ReadOnly {
		p.log.Info("set read_only=0", "instance", ss.Primary)
		if err := op.SetReadOnly(ctx, false); err != nil {
			return fmt.Errorf("failed to make the primary writable: %w", err)
		}
	}
	return nil
}

func (p *playedClustering) configureReplicaAt(ctx context.Context, in *instances, i int) error {
	ss := in.ss
	st, op := ss.MySQLStatus[i], ss.DBOps[i]
	if st.IsErrant {
		if st.ReplicaStatus != nil && st.ReplicaStatus.ReplicaIORunning == "Yes" {
			return op.StopReplicaIOThread(ctx)
		}
		return nil
	}
	if !st.GlobalVariables.SuperReadOnly {
		if err := op.KillConnections(ctx); err != nil {
			return fmt.Errorf("failed to kill connections in instance %d: %w", i, err)
		}
		if err := op.SetReadOnly(ctx, true); err != nil {
			return err
		}
	}
	sub, err := op.SubtractGTID(ctx, ss.MySQLStatus[ss.Primary].GlobalVariables.PurgedGTID, st.GlobalVariables.ExecutedGTID)
	if err != nil {
		return err
	}
	if sub != "" {
		return fmt.Errorf("new primary %d does not have binlog containing transactions %s required for instance %d", ss.Primary, sub, i)
	}
	ai := dbop.AccessInfo{
		Host:     ss.Cluster.PodHostname(ss.Primary),
		Port:     constants.MySQLPort,
		User:     constants.ReplicationUser,
		Password: ss.Password.Replicator(),
	}
	if st.ReplicaStatus == nil || st.ReplicaStatus.ReplicaIORunning != "Yes" || st.ReplicaStatus.SourceHost != ai.Host {
		p.log.Info("start replication", "instance", i, "source", ss.Primary, "user", ai.User)
		if err := configureReplica(ctx, in.dbs[i], translate(ss.Cluster, ai)); err != nil {
			return err
		}
		p.repoints.Add(1)
	}
	return nil
}
