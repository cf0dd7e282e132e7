package v1alpha1

// PostgresSpec says how to reach one PostgreSQL cluster (a primary and its
// streaming replicas) and which logins rotate. Each generation is a new
// login role <login.base>_g<generation>, a member of login.group that
// acts as the group (ALTER ROLE ... SET role), so that what an application
// creates belongs to the group, never to a generation. The old login role
// is dropped only once every consumer has moved.
//
// +kubebuilder:validation:XValidation:rule="!has(self.tlsCASecretRef) || !has(self.tls) || self.tls == 'VerifyFull'",fieldPath=".tlsCASecretRef",message="tlsCASecretRef verifies the servers' certificates, which only tls: VerifyFull does: remove tlsCASecretRef, or set tls: VerifyFull"
// +kubebuilder:validation:XValidation:rule="has(self.hosts) != has(self.statefulSets)",message="name the instances in spec.postgres.hosts (host:port of each) or spec.postgres.statefulSets (the StatefulSets whose pods they are): set exactly one of them"
// +kubebuilder:validation:XValidation:rule="has(self.login) != has(self.logins)",message="name the rotating login in spec.postgres.login, or several in spec.postgres.logins: set exactly one of them"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.logins) == has(self.logins) && (!has(self.logins) || (size(self.logins) == size(oldSelf.logins) && self.logins.all(l, oldSelf.logins.exists(o, o.base == l.base))))",fieldPath=".logins",message="spec.postgres.logins is fixed once the set exists (each login's keys in the source Secret hold its current password, and a set cannot move between login and logins): to rotate other logins, create another CredentialSet and delete this one once consumers moved"
// +kubebuilder:validation:XValidation:rule="!has(self.login) || self.login.base != self.login.group",fieldPath=".login.group",message="login.group must differ from login.base: the group owns the application's objects and each generation logs in as <base>_g<N>"
// +kubebuilder:validation:XValidation:rule="!has(self.adopt) || has(self.login)",fieldPath=".adopt",message="spec.postgres.adopt makes an existing role the first generation of spec.postgres.login; with spec.postgres.logins, each login adopts its own role: move adopt into the item of spec.postgres.logins whose role it is"
// +kubebuilder:validation:XValidation:rule="!has(self.login) || !has(self.login.adopt)",fieldPath=".login.adopt",message="with spec.postgres.login, the role to adopt goes in spec.postgres.adopt: move it there"
// +kubebuilder:validation:XValidation:rule="!has(self.logins) || self.logins.all(a, !has(a.adopt) || self.logins.all(b, a.adopt.role != b.group && !(a.adopt.role.startsWith(b.base + '_g') && a.adopt.role.substring(size(b.base) + 2).matches('^[0-9]+$'))))",fieldPath=".logins",message="a login's adopt.role is a group of spec.postgres.logins, which rekey never drops, or is named like a generation (<base>_g<N>) of one of them, which rekey creates and drops by itself: name the login role applications use today"
// +kubebuilder:validation:XValidation:rule="!has(self.logins) || self.logins.all(a, !has(a.adopt) || self.logins.exists_one(b, has(b.adopt) && b.adopt.role == a.adopt.role))",fieldPath=".logins",message="two logins of spec.postgres.logins adopt the same role: each login adopts a role of its own"
// +kubebuilder:validation:XValidation:rule="!has(self.adopt) || !has(self.login) || self.adopt.role != self.login.group",fieldPath=".adopt.role",message="spec.postgres.adopt.role is the group, which rekey never drops: name the login role applications use today"
// +kubebuilder:validation:XValidation:rule="!has(self.adopt) || !has(self.login) || !self.adopt.role.startsWith(self.login.base + '_g') || !self.adopt.role.substring(size(self.login.base) + 2).matches('^[0-9]+$')",fieldPath=".adopt.role",message="spec.postgres.adopt.role is named like one of this set's own generations (<login.base>_g<N>), which rekey creates and drops by itself: name the role applications log in as today, or give login.base another name"
// +kubebuilder:validation:XValidation:rule="!has(self.logins) || self.logins.all(a, self.logins.all(b, a.group != b.base))",fieldPath=".logins",message="a login's group has the base of a login of spec.postgres.logins: a group owns the application's objects and each login's generations are <base>_g<N>, so give the group or the base another name"
// +kubebuilder:validation:XValidation:rule="!has(self.logins) || self.logins.all(a, self.logins.all(b, !a.group.startsWith(b.base + '_g') || !a.group.substring(size(b.base) + 2).matches('^[0-9]+$')))",fieldPath=".logins",message="a login's group is named like a generation (<base>_g<N>) of a login of spec.postgres.logins, which rekey creates and drops by itself: name the role that owns the application's objects"
type PostgresSpec struct {
	// Hosts lists host:port of every instance, primary and replicas, in
	// any order: which one is the primary is read from each server
	// (pg_is_in_recovery) every time, never assumed, so a switchover
	// mid-rotation is followed. Set hosts or statefulSets.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?:[0-9]{1,5}$`
	// +kubebuilder:validation:items:MaxLength=259
	Hosts []string `json:"hosts,omitempty"`

	// StatefulSets, in the CredentialSet's namespace, whose pods are the
	// instances, instead of hosts: pod <name>-<ordinal> is reached at
	// <name>-<ordinal>.<serviceName>.<namespace>.svc:<port>, ordinals 0 to
	// spec.replicas-1, read anew every time (a scaled StatefulSet is
	// followed). Several for charts that run the primary and the replicas
	// in StatefulSets of their own. The primary is read from each server,
	// as with hosts.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	StatefulSets []PostgresStatefulSet `json:"statefulSets,omitempty"`

	// Database rekey connects to, and in which logins are proven; default
	// postgres.
	// +optional
	// +kubebuilder:default=postgres
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_$-]{0,62}$`
	// +kubebuilder:validation:MaxLength=63
	Database string `json:"database,omitempty"`

	// Admin is the role rekey acts as: a superuser, or a role with
	// CREATEROLE that is a member of login.group with ADMIN OPTION. Its
	// Secret is in the CredentialSet's namespace.
	Admin PostgresAdmin `json:"admin"`

	// TLS protects the connections rekey opens, which carry the admin's
	// and the rotated logins' passwords. VerifyFull (the default): TLS,
	// and each server's certificate is verified against tlsCASecretRef
	// (the system roots when unset) for the host it is reached by. The
	// others are explicit opt-outs that rekey reports with the Warning
	// InsecureTransport and the condition TransportVerified=False:
	// Require (TLS, any certificate accepted) and Disable (plaintext).
	// +optional
	// +kubebuilder:default=VerifyFull
	// +kubebuilder:validation:Enum=VerifyFull;Require;Disable
	TLS string `json:"tls,omitempty"`

	// TLSCASecretRef is a key of a Secret in the CredentialSet's
	// namespace holding the PEM CA certificate(s) that signed the
	// servers' certificates (CloudNativePG's <cluster>-ca, say).
	// +optional
	TLSCASecretRef *SecretKeyRef `json:"tlsCASecretRef,omitempty"`

	// Login is the identity that rotates, when the set rotates one. The
	// source and distributed Secrets hold it under username and password
	// (and CloudNativePG's keys, with connection).
	// +optional
	Login PostgresLogin `json:"login,omitzero"`

	// Logins are the identities that rotate together, for consumers that
	// use several (say a migration login and the application's): each is
	// rotated, retired and dropped as login is, in the same rotation. The
	// source and distributed Secrets hold each under its own keys, the
	// login's base and a dot before every key login would have
	// (app.username, app.password, app.uri, ...). Set login or logins.
	// +optional
	// +listType=map
	// +listMapKey=base
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Logins []PostgresLogin `json:"logins,omitempty"`

	// TerminateSessions: whenever rekey drops a login role (the old one
	// at the discard, an interrupted rotation's leftover, a rolled-back
	// generation, and the set's at its deletion), end the sessions still
	// logged in as it (pg_terminate_backend) instead of waiting for them.
	// Off by default: such a session belongs to a client that is not among
	// the set's consumers, and rekey reports it (a Warning naming each
	// session) rather than cut it off.
	// +optional
	TerminateSessions bool `json:"terminateSessions,omitempty"`

	// Adopt names a login role that exists before rekey manages it (the
	// one applications log in as today) and makes it generation 1: rekey
	// distributes it as it is, the first rotation moves consumers to
	// <login.base>_g2, and the adopted role is dropped when that rotation
	// completes. Read only while the set provisions
	// (status.keyGeneration 0).
	//
	// rekey adopts the role only if the password in passwordSecretRef logs
	// in as it: knowing the password is the proof that the set's author
	// may retire it. Adopting marks the role as this set's (its comment),
	// makes it a member of login.group acting as it, and hands what it
	// owns, in every database, to the group, so that the generations that
	// follow reach the same objects.
	// +optional
	Adopt *PostgresAdopt `json:"adopt,omitempty"`

	// Connection, when set, is where applications connect (a Service in
	// front of the primary, say), and distribution then writes
	// CloudNativePG's application Secret layout: username, password,
	// host, port, dbname, uri, jdbc-uri and pgpass. Without it the
	// distributed Secret holds username and password, the layout of the
	// Zalando operator's Secrets.
	// +optional
	Connection *PostgresConnection `json:"connection,omitempty"`
}

// PostgresStatefulSet is a StatefulSet whose pods are PostgreSQL
// instances.
type PostgresStatefulSet struct {
	// Name of the StatefulSet.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// ServiceName is the headless Service its pods are reached through;
	// default the StatefulSet's spec.serviceName.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	ServiceName string `json:"serviceName,omitempty"`
	// Port PostgreSQL listens on in each pod; default 5432.
	// +optional
	// +kubebuilder:default=5432
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// PostgresAdopt is an existing login role and where its password is.
type PostgresAdopt struct {
	// Role is the existing login role's name.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`
	// +kubebuilder:validation:MaxLength=63
	Role string `json:"role"`
	// PasswordSecretRef is a key of a Secret in the CredentialSet's
	// namespace holding the role's current password.
	PasswordSecretRef SecretKeyRef `json:"passwordSecretRef"`
}

// PostgresConnection is the address applications use, as written into
// the distributed Secret (rekey itself connects to spec.postgres.hosts).
type PostgresConnection struct {
	// Host applications connect to, e.g. app-rw.team.svc.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host"`
	// Port; default 5432.
	// +optional
	// +kubebuilder:default=5432
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
	// DBName is the application's database.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_$-]{0,62}$`
	// +kubebuilder:validation:MaxLength=63
	DBName string `json:"dbname"`
}

// PostgresAdmin names the admin credential.
type PostgresAdmin struct {
	SecretRef LocalSecretRef `json:"secretRef"`
	// +optional
	// +kubebuilder:default=username
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:MaxLength=253
	UsernameKey string `json:"usernameKey,omitempty"`
	// +optional
	// +kubebuilder:default=password
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:MaxLength=253
	PasswordKey string `json:"passwordKey,omitempty"`
}

// UsernameSecretKey is the admin Secret's user key, defaulted.
func (a PostgresAdmin) UsernameSecretKey() string {
	if a.UsernameKey == "" {
		return "username"
	}
	return a.UsernameKey
}

// PasswordSecretKey is the admin Secret's password key, defaulted.
func (a PostgresAdmin) PasswordSecretKey() string {
	if a.PasswordKey == "" {
		return "password"
	}
	return a.PasswordKey
}

// PostgresLogin is the rotating login and the group it acts as.
type PostgresLogin struct {
	// Base of the login role's name; generation N is <base>_g<N>. Lower
	// case, so that the name needs no quoting in a client's settings.
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,49}$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('_g[0-9]+$')",message="login.base must not itself end in _g<number>: rekey appends the generation that way"
	// +kubebuilder:validation:MaxLength=50
	Base string `json:"base"`
	// Group is an existing role (usually NOLOGIN) that owns the
	// application's objects and holds its grants. Every generation is a
	// member of it and acts as it from the start of each session.
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,62}$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pg_')",message="login.group names a role of PostgreSQL's own (pg_*): name the role that owns the application's objects"
	// +kubebuilder:validation:MaxLength=63
	Group string `json:"group"`
	// Adopt, in an item of spec.postgres.logins, names a login role that
	// exists before rekey manages it and makes it this login's generation
	// 1, as spec.postgres.adopt does for spec.postgres.login (same proof:
	// the password logs in as the role). Read only while the set
	// provisions.
	// +optional
	Adopt *PostgresAdopt `json:"adopt,omitempty"`
}

// RotatingLogins are the logins the set rotates: login, or logins.
func (s *PostgresSpec) RotatingLogins() []PostgresLogin {
	if len(s.Logins) > 0 {
		return s.Logins
	}
	return []PostgresLogin{s.Login}
}
