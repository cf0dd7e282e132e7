package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	mocov1beta2 "github.com/cybozu-go/moco/api/v1beta2"
	"github.com/cybozu-go/moco/pkg/constants"
	"github.com/cybozu-go/moco/pkg/dbop"
	"github.com/cybozu-go/moco/pkg/password"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// AddressesAnnotation, on a MySQLCluster, lists where the mysqld of each
// pod listens ("host:port" by ordinal, comma-separated). With it the
// played clustering loop works on the instances with MOCO's dbop code;
// without it, it decides the state from the pods alone.
//
// MOCO resolves a pod's IP and connects to its admin port (33062), and
// points replicas at the source's pod DNS name, port 3306. Neither
// reaches a test's mysqld: kwok's pod IPs are nobody's, and every test
// mysqld listens on 127.0.0.1 on a port of its own.
const AddressesAnnotation = "moco-harness.rekey.io/addresses"

// TerminatingAnnotation, on a MySQLCluster, names the ordinal of a pod
// whose deletion the test's pod model holds in MOCO's preStop hook
// (sleep 20 s in MOCO's mysqld container): its mysqld still runs. kwok
// deletes a pod at once, so the loop shows MOCO that pod as the kubelet
// would during preStop: still Ready, with a deletion timestamp; MOCO's
// own DecideState then asks for a switchover.
const TerminatingAnnotation = "moco-harness.rekey.io/terminating"

func addresses(cluster *mocov1beta2.MySQLCluster) []string {
	v := cluster.Annotations[AddressesAnnotation]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// podIPs plays the pods' network for MOCO's dbop.NewFactory, which dials
// <resolved address>:33062: for every instance address it listens on an
// address of its own in 127.0.0.0/8 at port 33062 and forwards to the
// instance, so that MOCO's own operator connects unchanged.
type podIPs struct {
	mu  sync.Mutex
	ips map[string]string // instance address → loopback IP
}

var _ dbop.Resolver = (*podIPs)(nil)

func (r *podIPs) Resolve(_ context.Context, cluster *mocov1beta2.MySQLCluster, index int) (string, error) {
	addrs := addresses(cluster)
	if index >= len(addrs) {
		return "", fmt.Errorf("no address for instance %d", index)
	}
	return r.ipFor(addrs[index])
}

func (r *podIPs) ipFor(target string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ip, ok := r.ips[target]; ok {
		return ip, nil
	}
	for attempt := 0; attempt < 20; attempt++ {
		b := make([]byte, 3)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		ip := fmt.Sprintf("127.%d.%d.%d", 1+b[0]%250, b[1], 1+b[2]%250)
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(constants.MySQLAdminPort)))
		if errors.Is(err, syscall.EADDRINUSE) {
			continue // another test's harness holds that address
		}
		if err != nil {
			return "", err
		}
		go forward(l, target)
		r.ips[target] = ip
		return ip, nil
	}
	return "", fmt.Errorf("no free loopback address for %s", target)
}

func forward(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			s, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				return
			}
			defer s.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
			<-done
		}()
	}
}

// adminDB connects as dbop.NewFactory's operator does (moco-admin, the
// admin port, the same driver settings), for the statements played here.
func adminDB(ip string, pwd *password.MySQLPassword) (*sqlx.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User = constants.AdminUser
	cfg.Passwd = pwd.Admin()
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(ip, strconv.Itoa(constants.MySQLAdminPort))
	cfg.InterpolateParams = true
	cfg.ParseTime = true
	cfg.Timeout = 5 * time.Second
	cfg.ReadTimeout = time.Minute
	return sqlx.Open("mysql", cfg.FormatDSN())
}

// getStatus plays dbop's (*operator).GetStatus, which fails on MySQL 9.x:
// it selects @@rpl_semi_sync_master_* and @@rpl_semi_sync_slave_enabled,
// variables of the semisync_master/semisync_slave plugins that MySQL 9
// no longer ships, and scans SHOW REPLICA STATUS into a struct that lacks
// 9.x's columns. It reads the same facts, with the addresses translated
// to the names MOCO compares: a source at an instance's address is that
// pod's host name (port 3306), and a connected replica's server ID is
// MOCO's serverIDBase + ordinal (the test's mysqld have IDs of their
// own). Semi-sync is reported off: the test's mysqld run without it.
func getStatus(ctx context.Context, db *sqlx.DB, cluster *mocov1beta2.MySQLCluster, uuids []string) (*dbop.MySQLInstanceStatus, error) {
	st := &dbop.MySQLInstanceStatus{GlobalStatus: &dbop.GlobalStatus{}}
	if err := db.GetContext(ctx, &st.GlobalVariables,
		"SELECT @@server_uuid, @@gtid_executed, @@gtid_purged, @@read_only, @@super_read_only"); err != nil {
		return nil, err
	}
	var hosts []dbop.ReplicaHost
	if err := db.Unsafe().SelectContext(ctx, &hosts, "SHOW REPLICAS"); err != nil {
		return nil, err
	}
	for _, h := range hosts {
		for i, u := range uuids {
			if u != "" && u == h.ReplicaUUID {
				h.ServerID = cluster.Spec.ServerIDBase + int32(i)
			}
		}
		st.ReplicaHosts = append(st.ReplicaHosts, h)
	}
	rs, err := replicaStatus(ctx, db)
	if err != nil || rs == nil {
		return st, err
	}
	n := func(k string) int { v, _ := strconv.Atoi(rs[k]); return v }
	st.ReplicaStatus = &dbop.ReplicaStatus{
		LastIoErrno: n("Last_IO_Errno"), LastIoError: rs["Last_IO_Error"],
		LastSQLErrno: n("Last_SQL_Errno"), LastSQLError: rs["Last_SQL_Error"],
		SourceHost: rs["Source_Host"], SourcePort: n("Source_Port"), SourceUser: rs["Source_User"],
		RetrievedGtidSet: rs["Retrieved_Gtid_Set"], ExecutedGtidSet: rs["Executed_Gtid_Set"],
		ReplicaIORunning: rs["Replica_IO_Running"], ReplicaSQLRunning: rs["Replica_SQL_Running"],
	}
	for i, a := range addresses(cluster) {
		if a == net.JoinHostPort(rs["Source_Host"], rs["Source_Port"]) {
			st.ReplicaStatus.SourceHost = cluster.PodHostname(i)
			st.ReplicaStatus.SourcePort = constants.MySQLPort
		}
	}
	return st, nil
}

func replicaStatus(ctx context.Context, db *sqlx.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW REPLICA STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		return nil, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out, nil
}

// configureReplica plays dbop's (*operator).ConfigureReplica, which asks
// SELECT SUBSTRING_INDEX(VERSION(), '.', 2) and refuses anything but 8.0
// and 8.4 ("unsupported version: 9.7"). It issues MOCO's 8.4 statements
// word for word, with MOCO's AccessInfo (moco-repl and the password MOCO
// read from the user Secret), the source's pod host name and port
// translated to the address its mysqld listens on. MOCO's two semi-sync
// statements (SET GLOBAL rpl_semi_sync_slave_enabled=?,
// rpl_semi_sync_master_enabled=OFF) are left out: their plugins do not
// exist in MySQL 9.
func configureReplica(ctx context.Context, db *sqlx.DB, source dbop.AccessInfo) error {
	if _, err := db.ExecContext(ctx, `STOP REPLICA`); err != nil {
		return fmt.Errorf("failed to stop replica: %w", err)
	}
	cmd := `CHANGE REPLICATION SOURCE TO SOURCE_HOST = :Host, SOURCE_PORT = :Port, SOURCE_USER = :User, SOURCE_PASSWORD = :Password, SOURCE_AUTO_POSITION = 1, GET_SOURCE_PUBLIC_KEY = 1`
	if _, err := db.NamedExecContext(ctx, cmd, source); err != nil {
		return fmt.Errorf("failed to change primary: %w", err)
	}
	if _, err := db.ExecContext(ctx, `START REPLICA`); err != nil {
		return fmt.Errorf("failed to start replica: %w", err)
	}
	return nil
}

// translate gives the address a source named as MOCO names it (pod host
// name, port 3306) really listens on.
func translate(cluster *mocov1beta2.MySQLCluster, ai dbop.AccessInfo) dbop.AccessInfo {
	for i, a := range addresses(cluster) {
		if ai.Host != cluster.PodHostname(i) {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return ai
		}
		ai.Host = host
		ai.Port, _ = strconv.Atoi(port)
	}
	return ai
}
