package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CredentialSet is the set of credentials of one backend target that rotate
// together, e.g. the system users of one MySQL cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=credset,categories=rekey
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.step`,description="what the rotation is doing or waiting for"
// +kubebuilder:printcolumn:name="Generation",type=integer,JSONPath=`.status.keyGeneration`
// +kubebuilder:printcolumn:name="Current-Since",type=date,JSONPath=`.status.currentSince`,description="age of the current credentials"
// +kubebuilder:printcolumn:name="Consumers",type=string,JSONPath=`.status.consumersUpdated`,description="consumers on the newest credentials (n/m)"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="has(self.spec)",message="spec is required"
type CredentialSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CredentialSetSpec   `json:"spec"`
	Status CredentialSetStatus `json:"status,omitempty"`
}

// CredentialSetSpec says which backend holds the credentials, who receives
// them and how rotation proceeds. Exactly one backend block is set.
//
// +kubebuilder:validation:XValidation:rule="!has(self.mysql) || !has(self.mysql.moco) || (has(self.consumers) && self.consumers.exists(c, c.kind == 'StatefulSet' && c.name == 'moco-' + self.mysql.moco.clusterName && !has(c.namespace)))",fieldPath=".consumers",message="MOCO's agents and mysqld pods read the system users' passwords when they start: add {kind: StatefulSet, name: moco-<clusterName>} to spec.consumers"
// +kubebuilder:validation:XValidation:rule="!has(self.deletionPolicy) || self.deletionPolicy != 'Delete' || !has(self.mysql) || (!has(self.mysql.moco) && !has(self.mysql.preset))",fieldPath=".deletionPolicy",message="deletionPolicy Delete would drop the MySQL system users the cluster itself logs in with (mysql.moco, mysql.preset): use Discard (the default) or Retain, or rotate application users in a set of their own"
// +kubebuilder:validation:XValidation:rule="[has(self.mysql), has(self.ceph), has(self.rabbitmq), has(self.postgres)].filter(x, x).size() == 1",message="set exactly one backend block: spec.mysql, spec.ceph, spec.rabbitmq or spec.postgres"
// +kubebuilder:validation:XValidation:rule="!has(self.rotation) || !has(self.rotation.policy) || self.rotation.policy != 'WithVersionUpgrade' || !has(self.ceph) || !has(self.ceph.strategy) || self.ceph.strategy != 'Overlapping'",message="WithVersionUpgrade would rotate keys with outside consumers on an upgrade nobody planned for them: use KeyGeneration or Schedule with strategy Overlapping"
// +kubebuilder:validation:XValidation:rule="!has(self.distribution) || has(self.ceph) || self.distribution.all(t, !has(t.format) || t.format == 'Native')",fieldPath=".distribution",message="distribution[].format CephCSI and CephCSIWithAdmin write a cephx entity's userID and userKey, for spec.ceph sets only: remove format (Native is the default) from this set's targets"
// +kubebuilder:validation:XValidation:rule="!has(self.distribution) || !has(self.ceph) || self.distribution.all(t, !has(t.format) || t.format == 'Native' || has(t.entity) || size(self.ceph.entities) == 1)",fieldPath=".distribution",message="a distribution target with format CephCSI or CephCSIWithAdmin holds the userID and userKey of one entity, but spec.ceph.entities has several: name the one it serves in the target's entity (e.g. entity: client.csi-rbd-node)"
// +kubebuilder:validation:XValidation:rule="!has(self.distribution) || !has(self.ceph) || self.distribution.all(t, !has(t.entity) || self.ceph.entities.exists(e, e.name == t.entity))",fieldPath=".distribution",message="a distribution target names an entity that is not in spec.ceph.entities: name one of them"
// +kubebuilder:validation:XValidation:rule="!has(self.distribution) || !has(self.ceph) || self.distribution.all(t, !has(t.format) || t.format == 'Native' || has(t.entity) || self.ceph.entities[0].name.startsWith('client.'))",fieldPath=".distribution",message="a CephCSI distribution target serves a client entity (ceph-csi connects as client.<userID>), but this set's only entity is not one: rotate a client.* entity"
// +kubebuilder:validation:XValidation:rule="!has(self.distribution) || has(self.postgres) || self.distribution.all(t, !has(t.login))",fieldPath=".distribution",message="distribution[].login picks one login of spec.postgres.logins, for spec.postgres sets only: remove login from this set's distribution targets"
// +kubebuilder:validation:XValidation:rule="!has(self.distribution) || !has(self.postgres) || self.distribution.all(t, !has(t.login) || (has(self.postgres.logins) && self.postgres.logins.exists(l, l.base == t.login)) || (has(self.postgres.login) && self.postgres.login.base == t.login))",fieldPath=".distribution",message="a distribution target's login is not a login of this set: name the base of one of spec.postgres.logins (app for the roles app_g<N>), or remove login to write every login's keys"
type CredentialSetSpec struct {
	// MySQL rotates MySQL users with dual passwords (RETAIN CURRENT PASSWORD).
	// +optional
	MySQL *MySQLSpec `json:"mysql,omitempty"`

	// Ceph rotates cephx keys, in place or overlapping.
	// +optional
	Ceph *CephSpec `json:"ceph,omitempty"`

	// RabbitMQ rotates a user by creating a new one per generation.
	// +optional
	RabbitMQ *RabbitMQSpec `json:"rabbitmq,omitempty"`

	// Postgres rotates a PostgreSQL login by creating a new login role per
	// generation, a member of a group role that owns the objects.
	// +optional
	Postgres *PostgresSpec `json:"postgres,omitempty"`

	// Distribution lists the Secrets the effective credentials are written
	// to, in any namespace. rekey owns these Secrets: never edit them by hand.
	// +optional
	// +listType=map
	// +listMapKey=namespace
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Distribution []SecretTarget `json:"distribution,omitempty"`

	// Consumers are the workloads restarted when new credentials are
	// distributed; discard waits until every one has rolled out. A CronJob
	// is not restarted: its Jobs read the credentials when they start, and
	// it has moved once no Job it started before the change still runs.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Consumers []ConsumerRef `json:"consumers,omitempty"`

	// ConsumerGroups are consumers rekey cannot watch roll out, such as
	// nodes updated in batches by outside automation: it reports members
	// as updated (kubectl rekey ack), and the old credentials are retired
	// only once every member of every group has.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	ConsumerGroups []ConsumerGroup `json:"consumerGroups,omitempty"`

	// Rotation sets when a rotation starts and how it completes.
	// +optional
	// +kubebuilder:default={}
	Rotation RotationSpec `json:"rotation,omitempty"`

	// DeletionPolicy says what deleting the set does to the backend:
	// Discard keeps only the current credentials valid, Delete removes the
	// identities rekey created, Retain changes nothing.
	// +optional
	// +kubebuilder:default=Discard
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// SecretTarget is a Secret rekey writes the effective credentials to.
//
// +kubebuilder:validation:XValidation:rule="!has(self.entity) || (has(self.format) && self.format != 'Native')",fieldPath=".entity",message="entity picks the one cephx entity a CephCSI Secret serves: set format CephCSI (or CephCSIWithAdmin), or remove entity"
type SecretTarget struct {
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Format is the layout of the Secret's data. Native (the default) is
	// the backend's own: every identity of the set under its own keys.
	// CephCSI (Ceph only) is what ceph-csi reads from its provisioner and
	// node-stage Secrets: userID (the entity's id, without "client.", e.g.
	// csi-rbd-node.3) and userKey (its bare base64 key), for one entity
	// (see entity). CephCSIWithAdmin also writes the same pair as adminID
	// and adminKey, which CephFS Secrets need for ceph-csi before 3.14.
	// +optional
	Format SecretFormat `json:"format,omitempty"`
	// Entity is, with a CephCSI format, the entity of spec.ceph.entities
	// (e.g. client.csi-rbd-node) whose current generation the Secret
	// serves. It may be left out when the set has only one entity.
	// +optional
	// +kubebuilder:validation:Pattern=`^client\.[A-Za-z0-9_][-A-Za-z0-9_.]{0,62}$`
	// +kubebuilder:validation:MaxLength=70
	Entity string `json:"entity,omitempty"`
	// Login is, for a spec.postgres set, the base of the one login (of
	// spec.postgres.logins) whose keys the Secret holds, without the
	// "<base>." prefix: username and password (the Zalando operator's
	// layout) and, with spec.postgres.connection, CloudNativePG's host,
	// port, dbname, uri, jdbc-uri and pgpass — what applications of one
	// login already read. Without it a set with several logins writes
	// every login's keys under its base and a dot.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,49}$`
	// +kubebuilder:validation:MaxLength=50
	Login string `json:"login,omitempty"`
}

// SecretFormat is the layout of a distribution Secret's data.
// +kubebuilder:validation:Enum=Native;CephCSI;CephCSIWithAdmin
type SecretFormat string

const (
	// FormatNative is the backend's own layout (the default).
	FormatNative SecretFormat = "Native"
	// FormatCephCSI is ceph-csi's userID/userKey for one cephx entity.
	FormatCephCSI SecretFormat = "CephCSI"
	// FormatCephCSIWithAdmin adds adminID/adminKey (the same entity's).
	FormatCephCSIWithAdmin SecretFormat = "CephCSIWithAdmin"
)

// CephCSI tells whether the format is one of ceph-csi's.
func (f SecretFormat) CephCSI() bool { return f == FormatCephCSI || f == FormatCephCSIWithAdmin }

// ConsumerKind is a workload kind rekey can restart and watch roll out.
type ConsumerKind string

const (
	KindStatefulSet ConsumerKind = "StatefulSet"
	KindDeployment  ConsumerKind = "Deployment"
	KindDaemonSet   ConsumerKind = "DaemonSet"
	// KindCronJob: nothing restarts; the CronJob's job template is marked
	// so that its next Jobs are known to read the new credentials, and it
	// has moved once no Job it controls from before the mark still runs.
	KindCronJob ConsumerKind = "CronJob"
	// KindGroup marks a consumer group in status (never in spec.consumers).
	KindGroup ConsumerKind = "Group"
)

// ConsumerRef names a workload that reads the distributed credentials.
// An Argo Rollout is refused with what to do instead: rekey cannot watch
// its rollout (docs/concepts.md, "Argo Rollouts and other workloads").
// +kubebuilder:validation:XValidation:rule="self.kind in ['StatefulSet', 'Deployment', 'DaemonSet', 'CronJob']",messageExpression="self.kind == 'Rollout' ? 'kind Rollout: rekey does not restart Argo Rollouts or watch their rollout; declare the Rollout in spec.consumerGroups, restart it with kubectl argo rollouts restart once rekey rotated, and acknowledge it with kubectl rekey ack when it has rolled out' : 'kind ' + self.kind + ': rekey restarts StatefulSet, Deployment, DaemonSet and CronJob consumers; for any other workload declare a consumerGroup and acknowledge it with kubectl rekey ack'"
type ConsumerRef struct {
	// Kind is StatefulSet, Deployment, DaemonSet or CronJob.
	// +kubebuilder:validation:MaxLength=63
	Kind ConsumerKind `json:"kind"`
	// Namespace defaults to the CredentialSet's namespace.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// DiscardPolicy says who ends a rotation by retiring the old credentials.
// +kubebuilder:validation:Enum=Manual;AfterRollout
type DiscardPolicy string

const (
	// DiscardManual waits for a discard request (kubectl rekey discard, or
	// the rekey.io/discard annotation) after a verification window.
	DiscardManual DiscardPolicy = "Manual"
	// DiscardAfterRollout discards by itself once every consumer has rolled
	// out and the grace period has passed.
	DiscardAfterRollout DiscardPolicy = "AfterRollout"
)

// ConsumerGroup is a named set of members (e.g. nodes) updated by outside
// automation.
type ConsumerGroup struct {
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=50
	Name string `json:"name"`
	// Members, e.g. node names.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +listType=set
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,251}[A-Za-z0-9])?$`
	// +kubebuilder:validation:items:MaxLength=253
	Members []string `json:"members"`
}

// RotationPolicy says what starts a rotation besides a rotate request:
// nothing (Disabled), a raised keyGeneration, a newer backend version, or
// the age of the current credentials (Schedule).
// +kubebuilder:validation:Enum=Disabled;KeyGeneration;WithVersionUpgrade;Schedule
type RotationPolicy string

const (
	// PolicyDisabled: only a rotate request starts a rotation.
	PolicyDisabled RotationPolicy = "Disabled"
	// PolicyKeyGeneration: rotate when rotation.keyGeneration exceeds
	// status.keyGeneration; status takes that value when done.
	PolicyKeyGeneration RotationPolicy = "KeyGeneration"
	// PolicyWithVersionUpgrade: rotate when the backend's version moves
	// past the one that minted the current keys (status.keyVersion).
	PolicyWithVersionUpgrade RotationPolicy = "WithVersionUpgrade"
	// PolicySchedule: rotate every rotation.interval.
	PolicySchedule RotationPolicy = "Schedule"
)

// RotationSpec sets when a rotation starts and how it completes.
// +kubebuilder:validation:XValidation:rule="!has(self.gracePeriod) || (has(self.discardPolicy) && self.discardPolicy == 'AfterRollout')",message="gracePeriod applies only to discardPolicy AfterRollout"
// +kubebuilder:validation:XValidation:rule="(has(self.policy) && self.policy == 'KeyGeneration') == has(self.keyGeneration)",message="keyGeneration goes with policy KeyGeneration: set both, or neither"
// +kubebuilder:validation:XValidation:rule="(has(self.policy) && self.policy == 'Schedule') == has(self.interval)",message="interval goes with policy Schedule: set both, or neither"
// +kubebuilder:validation:XValidation:rule="!has(self.interval) || duration(self.interval) >= duration('10m')",message="interval must be at least 10m: a rotation takes at least a rollout of every consumer"
// +kubebuilder:validation:XValidation:rule="!has(self.windows) || (has(self.policy) && self.policy == 'Schedule')",fieldPath=".windows",message="windows hold back only the rotations policy Schedule starts (a rotate request or a raised keyGeneration never waits): set policy Schedule with an interval, or remove windows"
type RotationSpec struct {
	// +kubebuilder:default=Disabled
	// +optional
	Policy RotationPolicy `json:"policy,omitempty"`
	// KeyGeneration is the desired generation with policy KeyGeneration:
	// raising it above status.keyGeneration starts one rotation.
	// +optional
	// +kubebuilder:validation:Minimum=1
	KeyGeneration *int64 `json:"keyGeneration,omitempty"`
	// DiscardGeneration discards declaratively, as a discard request
	// would: once the active rotation is Distributed and produces this
	// generation, rekey retires the old credentials when the discard's own
	// conditions hold (every consumer rolled out). Raise it to the
	// generation you verified, e.g. to rotation.keyGeneration after a
	// rotation it asked for; any other value discards nothing.
	// +optional
	// +kubebuilder:validation:Minimum=1
	DiscardGeneration *int64 `json:"discardGeneration,omitempty"`
	// Interval between rotations with policy Schedule, counted from when
	// the current credentials became current (e.g. 720h).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Windows are the maintenance windows a rotation policy Schedule starts
	// in: once the interval has passed, the rotation waits for the next
	// opening of any of them. A rotation that started runs to completion
	// even past the window's end, and neither a rotate request nor a
	// discard waits for a window. Unset: any time.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Windows []RotationWindow `json:"windows,omitempty"`

	// +kubebuilder:default=Manual
	// +optional
	DiscardPolicy DiscardPolicy `json:"discardPolicy,omitempty"`
	// GracePeriod is how long old credentials stay valid after the last
	// consumer rolled out, with discardPolicy AfterRollout (default 5m).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
	// StuckAfter is how long a rotation may stay active (Rotating or
	// Distributed) before rekey raises the RotationStuck condition, a
	// Warning Event and the rekey_rotation_stuck metric, naming what it
	// waits for. Unset: the manager's --rotation-stuck-after (default 1h).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="rotation.stuckAfter must be a positive duration (e.g. 30m, 2h)"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	StuckAfter *metav1.Duration `json:"stuckAfter,omitempty"`
}

// RotationWindow is a recurring time a scheduled rotation may start in,
// e.g. {days: [Sat, Sun], start: "02:00", duration: 3h, timeZone:
// Europe/Berlin}. It opens at start on each of its days (local time in
// timeZone) and stays open for duration, past midnight if it is long
// enough. On the day clocks spring forward, a start the clock skips opens
// that much later (02:30 opens at 03:30); on the day they fall back, a
// start the clock passes twice opens once, the second time.
type RotationWindow struct {
	// Days are the days the window opens on, in timeZone; every day when
	// unset.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	Days []Weekday `json:"days,omitempty"`
	// Start is when the window opens, as HH:MM on a 24-hour clock in
	// timeZone (e.g. 02:00 or 23:30).
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:XValidation:rule="self.matches('^([01][0-9]|2[0-3]):[0-5][0-9]$')",message="start is a time of day as HH:MM on a 24-hour clock, e.g. 02:00 or 23:30"
	Start string `json:"start"`
	// Duration is how long the window stays open once it opened (elapsed
	// time, e.g. 3h or 90m): more than 0, at most 168h (a week).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s') && duration(self) <= duration('168h')",message="duration is how long the window stays open, more than 0 and at most 168h (a week), e.g. 3h or 90m"
	Duration metav1.Duration `json:"duration"`
	// TimeZone is the IANA time zone start and days are read in (e.g.
	// Europe/Berlin); UTC when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$')",message="timeZone is an IANA time zone name such as Europe/Berlin, America/New_York or UTC"
	TimeZone string `json:"timeZone,omitempty"`
}

// Weekday is a day a maintenance window opens on.
// +kubebuilder:validation:Enum=Mon;Tue;Wed;Thu;Fri;Sat;Sun
type Weekday string

// CredentialSetList is a list of CredentialSets.
//
// +kubebuilder:object:root=true
type CredentialSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CredentialSet `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CredentialSet{}, &CredentialSetList{})
}
