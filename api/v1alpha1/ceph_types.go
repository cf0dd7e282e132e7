package v1alpha1

// CephStrategy is how a Ceph set rotates its entities' keys.
// +kubebuilder:validation:Enum=InPlace;Overlapping
type CephStrategy string

const (
	// CephInPlace rotates each entity's key with `ceph auth rotate`: the old
	// key dies at once, so only for daemon-style keys whose every consumer
	// rekey restarts (seed 001 "daemon keys"); live sessions carry over on
	// their service tickets.
	CephInPlace CephStrategy = "InPlace"
	// CephOverlapping creates a new entity per generation
	// (client.<name>.<generation>) with the same caps and keeps prior
	// generations until the rotation is discarded (seed 001 "Overlapping
	// rotation"), for keys with consumers outside rekey's control.
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
	Monitors []string `json:"monitors"`

	// Admin is the identity rekey runs ceph commands as.
	Admin CephAdmin `json:"admin"`

	// Config adds ceph.conf [global] options for rekey's commands, e.g.
	// ms_mon_client_mode: secure.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 64 && k.matches('^[a-z][a-z0-9_ ]*$'))",message="config keys are ceph option names: lower case letters, digits, _ and spaces"
	Config map[string]string `json:"config,omitempty"`

	// CLIPath is the ceph CLI rekey runs (as Rook does); default "ceph"
	// from PATH.
	// +optional
	// +kubebuilder:validation:Pattern=`^[^\x00\n]+$`
	// +kubebuilder:validation:MaxLength=1024
	CLIPath string `json:"cliPath,omitempty"`

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
	// uses (seed 001 "Unused keys"); rekey deletes them, and reports it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:Enum=client.bootstrap-rgw;client.bootstrap-rbd;client.bootstrap-mgr;client.bootstrap-mds
	RemoveUnusedKeys []string `json:"removeUnusedKeys,omitempty"`
}

// CephAdmin is the identity rekey runs ceph commands as.
type CephAdmin struct {
	// Entity is the admin's name; default client.admin. When it is one of
	// the set's entities, its rotation follows seed 001's admin procedure
	// through a temporary client.admin-rotator.
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
	// Caps given when rekey creates the entity (and kept equal to these).
	// +optional
	Caps CephCaps `json:"caps,omitempty"`
}

// CephCaps are an entity's capabilities per daemon type, e.g.
// mon: "profile rbd", osd: "profile rbd pool=rbd".
type CephCaps struct {
	// +optional
	// +kubebuilder:validation:Pattern=`^[ -~]{1,512}$`
	Mon string `json:"mon,omitempty"`
	// +optional
	// +kubebuilder:validation:Pattern=`^[ -~]{1,512}$`
	OSD string `json:"osd,omitempty"`
	// +optional
	// +kubebuilder:validation:Pattern=`^[ -~]{1,512}$`
	MGR string `json:"mgr,omitempty"`
	// +optional
	// +kubebuilder:validation:Pattern=`^[ -~]{1,512}$`
	MDS string `json:"mds,omitempty"`
}
