package v1alpha1

// MySQLSpec says how to reach one MySQL cluster and which users rotate.
//
// +kubebuilder:validation:XValidation:rule="has(self.moco) || has(self.preset) || (has(self.users) && size(self.users) > 0)",message="name the users to rotate: set mysql.preset, mysql.users, or both"
// +kubebuilder:validation:XValidation:rule="has(self.moco) != has(self.instances)",message="set either mysql.instances or mysql.moco (which takes the instances from the MySQLCluster), not both and not neither"
// +kubebuilder:validation:XValidation:rule="has(self.moco) || has(self.admin)",message="set mysql.admin, the account rekey connects as (with mysql.moco it is moco-admin and needs no setting)"
// +kubebuilder:validation:XValidation:rule="!has(self.moco) || (!has(self.admin) && !has(self.adoptSecretRef) && !has(self.users))",message="with mysql.moco, rekey connects as moco-admin and adopts all 8 passwords from MOCO's own Secret: remove mysql.admin, mysql.adoptSecretRef and mysql.users (rotate application users in a CredentialSet of their own)"
// +kubebuilder:validation:XValidation:rule="!has(self.tlsCASecretRef) || !has(self.tls) || self.tls == 'Required'",fieldPath=".tlsCASecretRef",message="mysql.tlsCASecretRef verifies the servers' certificates, which only tls: Required does: remove tlsCASecretRef or set mysql.tls to Required"
// +kubebuilder:validation:XValidation:rule="!has(self.tlsServerName) || !has(self.tls) || self.tls == 'Required'",fieldPath=".tlsServerName",message="mysql.tlsServerName is the name certificates are verified for, which only tls: Required does: remove tlsServerName or set mysql.tls to Required"
type MySQLSpec struct {
	// Instances are the cluster's mysqld instances; every credential change
	// is applied on each of them, because it is never written to the binlog.
	// Required unless moco is set.
	// +optional
	Instances MySQLInstances `json:"instances,omitzero"`

	// MOCO names a MySQLCluster (moco.cybozu.com) in the CredentialSet's
	// namespace whose 8 system users rotate: the instances, the admin, the
	// users and their current passwords all come from MOCO's objects, and
	// the new passwords go to the Secrets MOCO reads.
	// +optional
	MOCO *MOCOSpec `json:"moco,omitempty"`

	// Admin is the account rekey connects with. It may be one of the rotated
	// users (as moco-admin is); rekey then follows its password through the
	// rotation. Required unless moco is set.
	// +optional
	Admin MySQLAdmin `json:"admin,omitzero"`

	// Preset selects a known user list. "moco": MOCO's 8 system users and
	// its Secret keys (ADMIN_PASSWORD ... WRITABLE_PASSWORD).
	// +optional
	// +kubebuilder:validation:Enum=moco
	Preset string `json:"preset,omitempty"`

	// Users to rotate, besides the preset's if one is set.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +listMapKey=host
	// +kubebuilder:validation:MaxItems=128
	Users []MySQLUser `json:"users,omitempty"`

	// AdoptSecretRef names a Secret, in the CredentialSet's namespace, with
	// the passwords of users that already exist, under each user's
	// secretKey. Adopted at provisioning only; users without a key there are
	// created with a generated password.
	// +optional
	AdoptSecretRef *LocalSecretRef `json:"adoptSecretRef,omitempty"`

	// TLS protects the connections rekey opens, which carry the admin's and
	// the users' passwords. Required (the default): TLS, and the server's
	// certificate is verified against tlsCASecretRef (the system roots
	// when unset) for tlsServerName (each instance's host when unset).
	// The others are explicit opt-outs that rekey reports with the Warning
	// InsecureTransport and the condition TransportVerified=False:
	// SkipVerify (TLS, any certificate accepted), Preferred (TLS when the
	// server offers it, unverified) and Disabled (plaintext).
	// +optional
	// +kubebuilder:default=Required
	// +kubebuilder:validation:Enum=Required;SkipVerify;Preferred;Disabled
	TLS string `json:"tls,omitempty"`

	// TLSCASecretRef is a key of a Secret in the CredentialSet's namespace
	// holding the PEM CA certificate(s) that signed the instances'
	// certificates (a self-signed or cluster CA, as MOCO or cert-manager
	// set up). Only with tls: Required.
	// +optional
	TLSCASecretRef *SecretKeyRef `json:"tlsCASecretRef,omitempty"`

	// TLSServerName is the name every instance's certificate must hold,
	// for clusters whose instances share one certificate. When unset each
	// instance is verified for its own host (the host of hosts[], or
	// <pod>.<service>.<namespace>.svc). Only with tls: Required.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$`
	TLSServerName string `json:"tlsServerName,omitempty"`
}

// MySQLInstances is either a StatefulSet or an explicit list of addresses.
//
// +kubebuilder:validation:XValidation:rule="has(self.statefulSet) != has(self.hosts)",message="set either instances.statefulSet or instances.hosts"
type MySQLInstances struct {
	// StatefulSet whose pods are the instances:
	// <name>-<ordinal>.<serviceName>.<namespace>.svc:<port>, ordinals
	// 0..spec.replicas-1.
	// +optional
	StatefulSet *StatefulSetInstances `json:"statefulSet,omitempty"`
	// Hosts lists host:port of each instance (clusters outside Kubernetes).
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?:[0-9]{1,5}$`
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=259
	Hosts []string `json:"hosts,omitempty"`
}

// StatefulSetInstances locates instances through a StatefulSet.
type StatefulSetInstances struct {
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// ServiceName is the headless Service; defaults to the StatefulSet's
	// spec.serviceName.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ServiceName string `json:"serviceName,omitempty"`
	// +optional
	// +kubebuilder:default=3306
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// MySQLAdmin is the account rekey connects as.
type MySQLAdmin struct {
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][-A-Za-z0-9_.]{0,31}$`
	// +kubebuilder:validation:MaxLength=32
	User string `json:"user"`
	// PasswordSecretRef holds the admin's password. Required when the admin
	// is not a rotated user; when it is, it is the password adopted at
	// provisioning (the source Secret is the truth afterwards).
	// +optional
	PasswordSecretRef *SecretKeyRef `json:"passwordSecretRef,omitempty"`
}

// MySQLUser is one account that rotates.
//
// +kubebuilder:validation:XValidation:rule="!has(self.passwordLength) || self.passwordLength <= 32 || (self.name != 'moco-repl' && !(has(self.grants) && self.grants.exists(g, 'REPLICATION SLAVE' in g.privileges || (g.object == '*.*' && 'ALL PRIVILEGES' in g.privileges))))",fieldPath=".passwordLength",message="passwordLength: this user can be a replica's source user (moco-repl, or granted REPLICATION SLAVE or ALL PRIVILEGES on *.*), and MySQL refuses a replication password longer than 32 characters: set passwordLength to 32 or remove it (the default is 32 characters, 190 bits)"
type MySQLUser struct {
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][-A-Za-z0-9_.]{0,31}$`
	// +kubebuilder:validation:MaxLength=32
	Name string `json:"name"`
	// Host part of the account; default "%".
	// +optional
	// +kubebuilder:default="%"
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9%_.:-]{1,255}$`
	// +kubebuilder:validation:MaxLength=255
	Host string `json:"host,omitempty"`
	// SecretKey is the key holding the password in the source and
	// distributed Secrets; default <NAME>_PASSWORD in upper snake case.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Z0-9_]{0,62}$`
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!self.endsWith('_PENDING') && !self.endsWith('_ADDING') && self != 'ROTATION_ID'",message="secretKey must not end in _PENDING or _ADDING nor be ROTATION_ID: rekey uses those"
	SecretKey string `json:"secretKey,omitempty"`
	// Grants given when rekey creates the user.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Grants []MySQLGrant `json:"grants,omitempty"`
	// PasswordLength is how many characters (letters and digits) the
	// passwords rekey generates for this user have; default 32, about 190
	// bits, never less. At most 32 for a user a replica may use as its
	// source user: MySQL refuses a longer replication password.
	// +optional
	// +kubebuilder:validation:Minimum=32
	// +kubebuilder:validation:Maximum=128
	PasswordLength int32 `json:"passwordLength,omitempty"`
}

// MySQLGrant is GRANT <privileges> ON <object> TO user. (Not named "on":
// YAML 1.1, which kubectl and Helm use, reads a bare on as true.)
type MySQLGrant struct {
	// Privileges, one per item: a single-word privilege (SELECT,
	// BACKUP_ADMIN, ...) or one of MySQL's multi-word ones (ALL
	// PRIVILEGES, SHOW VIEW, REPLICATION CLIENT, ...). GRANT OPTION is not
	// a privilege here: say withGrantOption, so that it is visible.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^([A-Z][A-Z0-9_]{0,63}|ALL PRIVILEGES|ALTER ROUTINE|CREATE (ROLE|ROUTINE|TABLESPACE|TEMPORARY TABLES|USER|VIEW)|DROP ROLE|LOCK TABLES|REPLICATION (CLIENT|SLAVE)|SHOW (DATABASES|VIEW))$`
	// +kubebuilder:validation:items:MaxLength=64
	Privileges []string `json:"privileges"`
	// Object is db.table with * wildcards, e.g. "app.*" or "*.*".
	// +kubebuilder:validation:Pattern=`^(\*|[A-Za-z0-9_$]{1,64})\.(\*|[A-Za-z0-9_$]{1,64})$`
	// +kubebuilder:validation:MaxLength=129
	Object string `json:"object"`
	// +optional
	WithGrantOption bool `json:"withGrantOption,omitempty"`
}

// LocalSecretRef names a Secret in the CredentialSet's namespace.
type LocalSecretRef struct {
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretKeyRef is one key of a Secret in the CredentialSet's namespace.
type SecretKeyRef struct {
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}
