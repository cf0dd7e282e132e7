// Package moco knows the objects MOCO (github.com/cybozu-go/moco) makes
// for a MySQLCluster, as version Version makes them: the names and keys of
// the Secrets its controller, its agents and its backup Jobs read their
// passwords from, the form of its my.cnf Secret, and what its status
// conditions say. Everything here is a pure function; reading and writing
// the objects is internal/backend/mocokube's.
package moco

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Version is the MOCO release these names and forms were read from
// (pkg/password, pkg/constants, controllers/mysqlcluster_controller.go,
// api/v1beta2). A MOCO release that changes them needs a review here.
const Version = "v0.36.0"

// The MySQLCluster resource.
const (
	Group      = "moco.cybozu.com"
	APIVersion = Group + "/v1beta2"
	Kind       = "MySQLCluster"
	CRDName    = "mysqlclusters." + Group
)

// What MOCO puts on the Secrets it makes.
const (
	// SecretVersionAnnotation: MOCO refuses (does not read) a password
	// Secret without it, or with another value.
	SecretVersionAnnotation = "moco.cybozu.com/secret-version"
	SecretVersion           = "1"
	LabelName               = "app.kubernetes.io/name"
	LabelInstance           = "app.kubernetes.io/instance"
	LabelInstanceNamespace  = "app.kubernetes.io/instance-namespace"
	LabelCreatedBy          = "app.kubernetes.io/created-by"
	CreatedBy               = "moco"
	AppNameMySQL            = "mysql"
	AppNameBackup           = "mysql-backup"
)

// AdminUser is the account MOCO's controller administers mysqld as.
const AdminUser = "moco-admin"

// ReplicationUser is the account MOCO names in CHANGE REPLICATION SOURCE
// TO … SOURCE_USER, with REPLICATION_PASSWORD, whenever it points a replica
// at its source (every replica start, since mysqld runs with
// skip_replica_start, and every switchover): its password must be one
// MySQL accepts there, at most 32 characters.
const ReplicationUser = "moco-repl"

// MySQLPort is the port of every MOCO mysqld (not configurable in MOCO).
const MySQLPort = 3306

// Keys are the 8 system users' keys in MOCO's password Secrets, with the
// user each belongs to.
var Keys = []struct{ User, Key string }{
	{"moco-admin", "ADMIN_PASSWORD"},
	{"moco-agent", "AGENT_PASSWORD"},
	{"moco-repl", "REPLICATION_PASSWORD"},
	{"moco-clone-donor", "CLONE_DONOR_PASSWORD"},
	{"moco-exporter", "EXPORTER_PASSWORD"},
	{"moco-backup", "BACKUP_PASSWORD"},
	{"moco-readonly", "READONLY_PASSWORD"},
	{"moco-writable", "WRITABLE_PASSWORD"},
}

// Names are the objects MOCO makes for one MySQLCluster.
type Names struct {
	// StatefulSet and its headless Service: moco-<cluster>.
	StatefulSet, Service string
	// UserSecret (cluster namespace): the 8 passwords, read by the
	// controller's clustering loop (every cycle), by moco-agent and mysqld
	// (envFrom, at container start) and by backup Jobs (BACKUP_PASSWORD,
	// at start). MOCO re-applies it from ControllerSecret.
	UserSecret string
	// MyCnfSecret (cluster namespace): my.cnf files for 5 users, mounted
	// into the pods (read when a client starts). MOCO re-applies it from
	// ControllerSecret too.
	MyCnfSecret string
	// ControllerSecret (MOCO's own namespace): the source MOCO copies the
	// two others from.
	ControllerSecret string
	// BackupCronJob: present when the cluster has a backup policy.
	BackupCronJob string
}

// NamesOf gives the names MOCO uses for cluster in namespace.
func NamesOf(namespace, cluster string) Names {
	return Names{
		StatefulSet:      "moco-" + cluster,
		Service:          "moco-" + cluster,
		UserSecret:       "moco-" + cluster,
		MyCnfSecret:      "moco-my-cnf-" + cluster,
		ControllerSecret: fmt.Sprintf("mysql-%s.%s", namespace, cluster),
		BackupCronJob:    "moco-backup-" + cluster,
	}
}

// Instances are the cluster's mysqld pods, through its StatefulSet.
func Instances(cluster string) v1.MySQLInstances {
	n := NamesOf("", cluster)
	return v1.MySQLInstances{StatefulSet: &v1.StatefulSetInstances{Name: n.StatefulSet, ServiceName: n.Service, Port: MySQLPort}}
}

// InstancesOf is where a MySQL spec's instances are: its own, or, for a
// moco spec, its MySQLCluster's StatefulSet (lock keys and watches need
// them before the cluster is read).
func InstancesOf(spec *v1.MySQLSpec) v1.MySQLInstances {
	if spec.MOCO != nil {
		return Instances(spec.MOCO.ClusterName)
	}
	return spec.Instances
}

// DerivedSpec is the MySQL spec a moco set stands for: MOCO's instances,
// moco-admin as the admin (its password is adopted, then rotated), the 8
// system users. The rest (TLS) is the set's own.
func DerivedSpec(spec *v1.MySQLSpec) *v1.MySQLSpec {
	d := spec.DeepCopy()
	d.Instances = Instances(spec.MOCO.ClusterName)
	d.Admin = v1.MySQLAdmin{User: AdminUser}
	d.Preset = "moco"
	d.Users, d.AdoptSecretRef = nil, nil
	return d
}

// UserSecretData is what MOCO's user Secret holds for passwords (key →
// password): the 8 keys, nothing else.
func UserSecretData(passwords map[string]string) map[string][]byte {
	out := map[string][]byte{}
	for _, k := range Keys {
		out[k.Key] = []byte(passwords[k.Key])
	}
	return out
}

// myCnfUsers: the my.cnf entries MOCO writes, and the socket it names for
// the exporter (which runs beside mysqld).
var myCnfUsers = []struct{ user, key, socket string }{
	{"moco-admin", "ADMIN_PASSWORD", ""},
	{"moco-exporter", "EXPORTER_PASSWORD", "/run/mysqld.sock"},
	{"moco-backup", "BACKUP_PASSWORD", ""},
	{"moco-readonly", "READONLY_PASSWORD", ""},
	{"moco-writable", "WRITABLE_PASSWORD", ""},
}

// MyCnfData is what MOCO's my.cnf Secret holds for passwords: for each of
// 5 users, <user>-my.cnf with a [client] section, values double-quoted
// as MOCO writes them.
func MyCnfData(passwords map[string]string) map[string][]byte {
	out := map[string][]byte{}
	for _, u := range myCnfUsers {
		s := "[client]\nuser=" + strconv.Quote(u.user) + "\npassword=" + strconv.Quote(passwords[u.key]) + "\n"
		if u.socket != "" {
			s += "socket=" + strconv.Quote(u.socket) + "\n"
		}
		out[u.user+"-my.cnf"] = []byte(s)
	}
	return out
}

// Merged is data with update's keys written over it; other keys (none in
// MOCO's Secrets today) are kept.
func Merged(data, update map[string][]byte) map[string][]byte {
	out := maps.Clone(data)
	if out == nil {
		out = map[string][]byte{}
	}
	maps.Copy(out, update)
	return out
}

// Passwords reads the 8 passwords from a MOCO password Secret's data, and
// names the keys that are missing or empty.
func Passwords(data map[string][]byte) (map[string]string, []string) {
	out, missing := map[string]string{}, []string(nil)
	for _, k := range Keys {
		if v := data[k.Key]; len(v) > 0 {
			out[k.Key] = string(v)
		} else {
			missing = append(missing, k.Key)
		}
	}
	slices.Sort(missing)
	return out, missing
}
