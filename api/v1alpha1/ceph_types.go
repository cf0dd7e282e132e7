package v1alpha1

// CephStrategy is how a Ceph set rotates its entities' keys.
// +kubebuilder:validation:Enum=InPlace;Overlapping
type CephStrategy string

const (
	// CephInPlace rotates each entity's key with `ceph auth rotate`: the old
	// key dies at once, so only for daemon-style keys whose every consumer
	// rekey restarts (Ceph daemons' own keys); live sessions carry over on
	// their service tickets.
	CephInPlace CephStrategy = "InPlace"
	// CephOverlapping creates a new entity per generation
	// (client.<name>.<generation>) with the same caps and keeps prior
	// generations until the rotation is discarded, for keys with consumers
	// outside rekey's control.
	CephOverlapping CephStrategy = "Overlapping"
)

// CephSpec says how to reach one Ceph cluster and which cephx entities
// rotate. Every entity of a set rotates with the set's strategy; put keys
// that need another strategy in another set.
//
// +kubebuilder:validation:XValidation:rule="!has(self.keepPriorKeyCount) || (has(self.strategy) && self.strategy == 'Overlapping')",message="keepPriorKeyCount applies only to strategy Overlapping (InPlace keeps no prior keys): remove it, or set strategy: Overlapping"
// +kubebuilder:validation:XValidation:rule="!has(self.strategy) || self.strategy != 'Overlapping' || self.entities.all(e, e.name.startsWith('client.'))",message="strategy Overlapping creates a new entity per generation, which only client.* entities can be: rotate daemon keys with strategy InPlace"
// +kubebuilder:validation:XValidation:rule="!has(self.strategy) || self.strategy != 'Overlapping' || !has(self.admin.entity) || self.entities.all(e, e.name != self.admin.entity)",message="the admin entity rotates in place through client.admin-rotator: list it in a set with strategy InPlace"
type CephSpec struct {
	// Monitors are the mon addresses (ceph.conf mon_host entries), e.g.
	// v2:10.0.0.1:3300 or 10.0.0.1:6789.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^(v[12]:)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?)(:[0-9]{1,5})?$`
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=300
	Monitors []string `json:"monitors"`

	// Admin is the identity rekey runs ceph commands as.
	Admin CephAdmin `json:"admin"`

	// Config adds ceph.conf [global] options for rekey's commands, e.g.
	// ms_mon_client_mode: secure. Only client connection settings are
	// allowed (an option that names a file, a socket or a plugin would
	// let a spec make the manager write files or load code). Values are
	// short words and numbers (CephConfigValue) at admission, and checked
	// per option by the backend.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 64 && k.matches('^[a-z][a-z0-9_ ]*$'))",message="config keys are ceph option names: lower case letters, digits, _ and spaces"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['ms_mon_client_mode', 'ms_client_mode', 'auth_client_required', 'rados_mon_op_timeout', 'rados_osd_op_timeout', 'client_mount_timeout', 'mon_client_hunt_interval', 'mon_client_hunt_interval_max_multiple', 'mon_client_hunt_interval_backoff', 'mon_client_hunt_parallel', 'mon_client_ping_interval', 'mon_client_ping_timeout', 'ms_connection_ready_timeout', 'ms_bind_ipv4', 'ms_bind_ipv6'])",message="spec.ceph.config: only client connection options may be set (ms_mon_client_mode, ms_client_mode, auth_client_required, rados_mon_op_timeout, rados_osd_op_timeout, client_mount_timeout, mon_client_hunt_interval, mon_client_hunt_interval_max_multiple, mon_client_hunt_interval_backoff, mon_client_hunt_parallel, mon_client_ping_interval, mon_client_ping_timeout, ms_connection_ready_timeout, ms_bind_ipv4, ms_bind_ipv6), written with underscores; remove any other key"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['ms_bind_ipv4', 'ms_bind_ipv6']) || self[k] in ['true', 'false'])",message="spec.ceph.config: ms_bind_ipv4 and ms_bind_ipv6 take true or false"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['ms_mon_client_mode', 'ms_client_mode']) || self[k] in ['secure', 'crc', 'secure crc', 'crc secure'])",message="spec.ceph.config: ms_mon_client_mode and ms_client_mode take secure, crc, or both"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k != 'auth_client_required' || self[k] == 'cephx')",message="spec.ceph.config: auth_client_required takes cephx"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['ms_mon_client_mode', 'ms_client_mode', 'auth_client_required', 'ms_bind_ipv4', 'ms_bind_ipv6'] || self[k].matches('^[0-9]{1,6}([.][0-9]{1,3})?$'))",message="spec.ceph.config: timeouts, intervals and counts are plain numbers (e.g. 30 or 2.5)"
	Config map[string]CephConfigValue `json:"config,omitempty"`

	// +optional
	// +kubebuilder:default=InPlace
	Strategy CephStrategy `json:"strategy,omitempty"`

	// KeepPriorKeyCount is how many prior generations' entities stay after
	// a rotation is discarded (Overlapping only, default 1): 0 deletes the
	// old entity at discard.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	KeepPriorKeyCount *int32 `json:"keepPriorKeyCount,omitempty"`

	// Entities are the cephx identities that rotate together.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	Entities []CephEntity `json:"entities"`

	// RemoveUnusedKeys lists bootstrap entities Ceph creates but nothing
	// uses: rotating them would serve nobody, so rekey deletes them, and
	// reports it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:Enum=client.bootstrap-rgw;client.bootstrap-rbd;client.bootstrap-mgr;client.bootstrap-mds
	// +kubebuilder:validation:MaxItems=4
	RemoveUnusedKeys []string `json:"removeUnusedKeys,omitempty"`
}

// CephConfigValue is the value of one ceph.conf option: a short word or
// number, on one line, never an option of the CLI.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9. ]{0,31}$`
type CephConfigValue string

// CephAdmin is the identity rekey runs ceph commands as.
type CephAdmin struct {
	// Entity is the admin's name; default client.admin. When it is one of
	// the set's entities, its key rotates through a temporary
	// client.admin-rotator, stored first, so that a crash at any point
	// leaves an admin able to finish the rotation.
	// +optional
	// +kubebuilder:default=client.admin
	// +kubebuilder:validation:Pattern=`^client\.[A-Za-z0-9_][-A-Za-z0-9_.]{0,62}$`
	// +kubebuilder:validation:MaxLength=70
	Entity string `json:"entity,omitempty"`
	// KeyringSecretRef holds the admin's keyring file ([client.admin] key =
	// ...), in the CredentialSet's namespace. When rekey rotates the admin
	// key it rewrites this Secret (and keeps the rotator's keyring in
	// <name>-rotator while a rotation is under way).
	KeyringSecretRef SecretKeyRef `json:"keyringSecretRef"`
}

// CephEntity is one cephx identity and the caps it is created with.
type CephEntity struct {
	// Name is the entity, e.g. client.csi-rbd or mgr.a. With strategy
	// Overlapping, generation N is the entity <name>.<N>.
	// +kubebuilder:validation:Pattern=`^(client|mgr|mds|osd)\.[A-Za-z0-9_][-A-Za-z0-9_.]{0,62}$`
	// +kubebuilder:validation:MaxLength=70
	// +kubebuilder:validation:XValidation:rule="!self.endsWith('_PENDING')",message="entity names must not end in _PENDING: rekey uses that suffix"
	Name string `json:"name"`
	// Caps given to the entity when rekey creates it (and to each new
	// generation under Overlapping). rekey never changes an existing
	// entity's caps: an adopted entity keeps its own, and a difference is
	// reported by the condition CapsMatch=False and a CapsDiffer Warning.
	// +optional
	Caps CephCaps `json:"caps,omitempty"`
}

// CephCaps are an entity's capabilities per daemon type, e.g.
// mon: "profile rbd", osd: "profile rbd pool=rbd". Each is a list of cap
// clauses separated by "," (or ";"): a clause starts with allow or
// profile, and its words are letters, digits and _.:/*=@+~- (never a
// leading -) or quoted strings, e.g. allow rw pool=x namespace=y, allow
// command "config get", allow service mgr r.
type CephCaps struct {
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule=`self.matches('^ *(allow|profile)( +(([A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)([-A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)*))+( *[,;] *(allow|profile)( +(([A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)([-A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)*))+)* *$')`,message="caps.mon must be cap clauses such as 'allow r' or 'profile rbd', separated by commas: each clause starts with allow or profile; words are letters, digits and _.:/*=@+~- (never a leading -) or quoted strings, on one line"
	Mon string `json:"mon,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule=`self.matches('^ *(allow|profile)( +(([A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)([-A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)*))+( *[,;] *(allow|profile)( +(([A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)([-A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)*))+)* *$')`,message="caps.osd must be cap clauses such as 'allow rw pool=x namespace=y' or 'profile rbd pool=rbd', separated by commas: each clause starts with allow or profile; words are letters, digits and _.:/*=@+~- (never a leading -) or quoted strings, on one line"
	OSD string `json:"osd,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule=`self.matches('^ *(allow|profile)( +(([A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)([-A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)*))+( *[,;] *(allow|profile)( +(([A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)([-A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)*))+)* *$')`,message="caps.mgr must be cap clauses such as 'allow r' or 'profile rbd pool=rbd', separated by commas: each clause starts with allow or profile; words are letters, digits and _.:/*=@+~- (never a leading -) or quoted strings, on one line"
	MGR string `json:"mgr,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule=`self.matches('^ *(allow|profile)( +(([A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)([-A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)*))+( *[,;] *(allow|profile)( +(([A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)([-A-Za-z0-9_.:/*=@+~]|"[ !#-~]*"|\x27[ -&(-~]*\x27)*))+)* *$')`,message="caps.mds must be cap clauses such as 'allow rw path=/x' or 'profile rbd', separated by commas: each clause starts with allow or profile; words are letters, digits and _.:/*=@+~- (never a leading -) or quoted strings, on one line"
	MDS string `json:"mds,omitempty"`
}
