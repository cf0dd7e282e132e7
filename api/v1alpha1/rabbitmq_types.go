package v1alpha1

// RabbitMQSpec says how to reach one RabbitMQ cluster and which user
// rotates. Each generation is a new user <user.base>-g<generation> with the
// same tags and permissions; the old one is deleted only when
// every consumer that can hold it has moved: the set's own, and those of
// every other set that adopted the same user (spec.rabbitmq.adopt).
//
// +kubebuilder:validation:XValidation:rule="!has(self.configFile) || has(self.transportURL)",message="configFile renders the transport_url: set transportURL too"
// +kubebuilder:validation:XValidation:rule="!self.endpoint.startsWith('http://') || (has(self.allowPlaintextHTTP) && self.allowPlaintextHTTP)",fieldPath=".endpoint",message="an http:// endpoint sends the admin's and every rotated user's password over the network unencrypted: use https:// (with tls.caSecretRef for a private CA), or accept plaintext explicitly with spec.rabbitmq.allowPlaintextHTTP: true"
// +kubebuilder:validation:XValidation:rule="!has(self.allowPlaintextHTTP) || !self.allowPlaintextHTTP || self.endpoint.startsWith('http://')",fieldPath=".allowPlaintextHTTP",message="spec.rabbitmq.allowPlaintextHTTP applies only to an http:// endpoint: remove it, so that a later change back to http:// needs a new explicit opt-in"
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || self.endpoint.startsWith('https://')",fieldPath=".tls",message="spec.rabbitmq.tls applies only to an https:// endpoint: remove it, or make the endpoint https://"
// +kubebuilder:validation:XValidation:rule="!has(self.adopt) || !self.adopt.user.startsWith(self.user.base + '-g') || !self.adopt.user.substring(size(self.user.base) + 2).matches('^[0-9]+$')",fieldPath=".adopt.user",message="spec.rabbitmq.adopt.user is named like one of this set's own generations (<user.base>-g<N>), which rekey creates and deletes by itself: name the user your services log in as today, or give user.base another name"
type RabbitMQSpec struct {
	// Endpoint is the management HTTP API, e.g.
	// https://rabbitmq.ns.svc:15671. An http:// endpoint needs
	// allowPlaintextHTTP.
	// +kubebuilder:validation:Pattern=`^https?://[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]{1,5})?/?$`
	// +kubebuilder:validation:MaxLength=512
	Endpoint string `json:"endpoint"`

	// Admin is the management user rekey acts as; its Secret is in the
	// CredentialSet's namespace.
	Admin RabbitMQAdmin `json:"admin"`

	// AllowPlaintextHTTP accepts an http:// endpoint, over which the
	// admin's password and every rotated user's password cross the
	// network unencrypted. An explicit field rather than the endpoint's
	// scheme alone, so that plaintext is a decision a reviewer sees; the
	// set then carries an InsecureTransport Warning and
	// TransportVerified=False. Only allowed with an http:// endpoint.
	// +optional
	AllowPlaintextHTTP bool `json:"allowPlaintextHTTP,omitempty"`

	// TLS for an https endpoint (the only kind it applies to).
	// +optional
	TLS *RabbitMQTLS `json:"tls,omitempty"`

	// User is the identity that rotates.
	User RabbitMQUser `json:"user"`

	// Adopt names a user that exists before rekey manages the service
	// (the one its consumers log in as today) and makes it generation 1:
	// rekey distributes it as it is, the first rotation moves consumers to
	// <user.base>-g2, and the adopted user is deleted when that rotation
	// completes, instead of living on beside rekey's users. Read only
	// while the set provisions (status.keyGeneration 0).
	//
	// rekey adopts the user only if the password in passwordSecretRef logs
	// in as it: knowing the password is the proof that the set's author
	// may retire it. Adopting marks the user rekey-owner-<set UID> (its
	// other tags and its permissions stay as they are). Several sets may
	// adopt the same user, each with the proof; it is then deleted only
	// once the consumers of every one of them have moved.
	// +optional
	Adopt *RabbitMQAdopt `json:"adopt,omitempty"`

	// TransportURL, when set, makes distribution also write transport_url
	// (rabbit://user:pass@host:port/vhost?query, every part escaped).
	// +optional
	TransportURL *RabbitMQTransportURL `json:"transportURL,omitempty"`

	// ConfigFile, when set, also renders the transport_url inside an
	// INI-style config file key, as consumers that read a config file
	// (such as an OpenStack service's nova.conf) need.
	// +optional
	ConfigFile *RabbitMQConfigFile `json:"configFile,omitempty"`
}

// RabbitMQAdmin names the admin credential.
type RabbitMQAdmin struct {
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

// RabbitMQAdopt is an existing user and where its password is.
type RabbitMQAdopt struct {
	// User is the existing user's name.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-A-Za-z0-9_.]{0,99}$`
	// +kubebuilder:validation:MaxLength=100
	User string `json:"user"`
	// PasswordSecretRef is a key of a Secret in the CredentialSet's
	// namespace holding the user's current password.
	PasswordSecretRef SecretKeyRef `json:"passwordSecretRef"`
}

// RabbitMQTLS configures the management API client for https.
type RabbitMQTLS struct {
	// CASecretRef holds the PEM CA bundle that signed the endpoint's
	// certificate; default the system roots.
	// +optional
	CASecretRef *SecretKeyRef `json:"caSecretRef,omitempty"`
	// InsecureSkipVerify disables certificate verification: anyone on
	// the path can then read the admin's and the rotated users'
	// passwords. The set carries an InsecureTransport Warning and
	// TransportVerified=False while it is on.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// RabbitMQUser is the rotating user's name, tags and permissions.
type RabbitMQUser struct {
	// Base of the user name; generation N is <base>-g<N>.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-A-Za-z0-9_.]{0,99}$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('-g[0-9]+$')",message="user.base must not itself end in -g<number>: rekey appends the generation that way"
	// +kubebuilder:validation:MaxLength=100
	Base string `json:"base"`
	// Tags, e.g. management or monitoring; none by default. Tags
	// beginning with rekey-owner- are rekey's own marks of ownership.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(t, !t.startsWith('rekey-owner-'))",message="user.tags beginning with rekey-owner- are reserved: rekey tags every user it creates rekey-owner-<CredentialSet UID> by itself"
	// +kubebuilder:validation:items:Pattern=`^[a-z][a-z_-]{0,31}$`
	// +kubebuilder:validation:items:MaxLength=32
	Tags []string `json:"tags,omitempty"`
	// Permissions per vhost (configure/write/read regular expressions).
	// +optional
	// +listType=map
	// +listMapKey=vhost
	// +kubebuilder:validation:MaxItems=64
	Permissions []RabbitMQPermission `json:"permissions,omitempty"`
	// TopicPermissions per vhost and exchange.
	// +optional
	// +listType=map
	// +listMapKey=vhost
	// +listMapKey=exchange
	// +kubebuilder:validation:MaxItems=64
	TopicPermissions []RabbitMQTopicPermission `json:"topicPermissions,omitempty"`
}

// RabbitMQPermission is a vhost permission; the three fields are regular
// expressions over resource names ("" grants nothing, ".*" everything).
type RabbitMQPermission struct {
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1f]{1,255}$`
	// +kubebuilder:validation:MaxLength=255
	Vhost string `json:"vhost"`
	// +kubebuilder:validation:MaxLength=1024
	Configure string `json:"configure"`
	// +kubebuilder:validation:MaxLength=1024
	Write string `json:"write"`
	// +kubebuilder:validation:MaxLength=1024
	Read string `json:"read"`
}

// RabbitMQTopicPermission limits routing keys on a topic exchange.
type RabbitMQTopicPermission struct {
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1f]{1,255}$`
	// +kubebuilder:validation:MaxLength=255
	Vhost string `json:"vhost"`
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1f]{1,255}$`
	// +kubebuilder:validation:MaxLength=255
	Exchange string `json:"exchange"`
	// +kubebuilder:validation:MaxLength=1024
	Write string `json:"write"`
	// +kubebuilder:validation:MaxLength=1024
	Read string `json:"read"`
}

// RabbitMQTransportURL is how consumers reach the broker over AMQP.
//
// +kubebuilder:validation:XValidation:rule="!has(self.scheme) || self.scheme != 'amqps' || !has(self.query) || !self.query.matches('(^|&)ssl=(0|false|False)(&|$)')",fieldPath=".query",message="transportURL.scheme amqps means TLS, but the query turns ssl off: remove ssl=0 from transportURL.query, or choose scheme rabbit or amqp"
type RabbitMQTransportURL struct {
	// +optional
	// +kubebuilder:default=rabbit
	// +kubebuilder:validation:Enum=rabbit;amqp;amqps
	Scheme string `json:"scheme,omitempty"`
	// Hosts are host:port of the AMQP listeners; several make an
	// oslo.messaging style rabbit://u:p@h1:p1,u:p@h2:p2/ URL.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?:[0-9]{1,5}$`
	// +kubebuilder:validation:items:MaxLength=259
	Hosts []string `json:"hosts"`
	// Vhost; default "/" (written as an empty path).
	// +optional
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1f]{0,255}$`
	// +kubebuilder:validation:MaxLength=255
	Vhost string `json:"vhost,omitempty"`
	// Query, e.g. ssl=1, without the leading "?".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.~=&%-]{0,512}$`
	Query string `json:"query,omitempty"`
	// Key of the distributed Secret; default transport_url.
	// +optional
	// +kubebuilder:default=transport_url
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// RabbitMQConfigFile renders "[section]\noption = <transport_url>" under
// a key of the distributed Secret.
type RabbitMQConfigFile struct {
	// Key of the distributed Secret, e.g. 01-nova.conf.
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
	// +optional
	// +kubebuilder:default=DEFAULT
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,64}$`
	// +kubebuilder:validation:MaxLength=64
	Section string `json:"section,omitempty"`
	// +optional
	// +kubebuilder:default=transport_url
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,64}$`
	// +kubebuilder:validation:MaxLength=64
	Option string `json:"option,omitempty"`
}
