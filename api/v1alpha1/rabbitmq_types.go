package v1alpha1

// RabbitMQSpec says how to reach one RabbitMQ cluster and which user
// rotates. Each generation is a new user <user.base>-g<generation> with the
// same tags and permissions (seed 004); the old one is deleted only when
// every consumer of every set on the same cluster has moved.
//
// +kubebuilder:validation:XValidation:rule="!has(self.configFile) || has(self.transportURL)",message="configFile renders the transport_url: set transportURL too"
type RabbitMQSpec struct {
	// Endpoint is the management HTTP API, e.g. http://rabbitmq.ns.svc:15672.
	// +kubebuilder:validation:Pattern=`^https?://[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]{1,5})?/?$`
	// +kubebuilder:validation:MaxLength=512
	Endpoint string `json:"endpoint"`

	// Admin is the management user rekey acts as; its Secret is in the
	// CredentialSet's namespace.
	Admin RabbitMQAdmin `json:"admin"`

	// TLS for an https endpoint.
	// +optional
	TLS *RabbitMQTLS `json:"tls,omitempty"`

	// User is the identity that rotates.
	User RabbitMQUser `json:"user"`

	// TransportURL, when set, makes distribution also write transport_url
	// (rabbit://user:pass@host:port/vhost?query, every part escaped).
	// +optional
	TransportURL *RabbitMQTransportURL `json:"transportURL,omitempty"`

	// ConfigFile, when set, also renders the transport_url inside an
	// INI-style config file key, as consumers that read a config file
	// (seed 004's 01-nova.conf) need.
	// +optional
	ConfigFile *RabbitMQConfigFile `json:"configFile,omitempty"`
}

// RabbitMQAdmin names the admin credential.
type RabbitMQAdmin struct {
	SecretRef LocalSecretRef `json:"secretRef"`
	// +optional
	// +kubebuilder:default=username
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	UsernameKey string `json:"usernameKey,omitempty"`
	// +optional
	// +kubebuilder:default=password
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	PasswordKey string `json:"passwordKey,omitempty"`
}

// RabbitMQTLS configures the management API client for https.
type RabbitMQTLS struct {
	// CASecretRef holds the PEM CA bundle that signed the endpoint's
	// certificate; default the system roots.
	// +optional
	CASecretRef *SecretKeyRef `json:"caSecretRef,omitempty"`
	// InsecureSkipVerify disables certificate verification (tests only).
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// RabbitMQUser is the rotating user's name, tags and permissions.
type RabbitMQUser struct {
	// Base of the user name; generation N is <base>-g<N>.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-A-Za-z0-9_.]{0,99}$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('-g[0-9]+$')",message="user.base must not itself end in -g<number>: rekey appends the generation that way"
	Base string `json:"base"`
	// Tags, e.g. management or monitoring; none by default.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:Pattern=`^[a-z][a-z_-]{0,31}$`
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
	Vhost string `json:"vhost"`
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1f]{1,255}$`
	Exchange string `json:"exchange"`
	// +kubebuilder:validation:MaxLength=1024
	Write string `json:"write"`
	// +kubebuilder:validation:MaxLength=1024
	Read string `json:"read"`
}

// RabbitMQTransportURL is how consumers reach the broker over AMQP.
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
	Hosts []string `json:"hosts"`
	// Vhost; default "/" (written as an empty path).
	// +optional
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1f]{0,255}$`
	Vhost string `json:"vhost,omitempty"`
	// Query, e.g. ssl=1, without the leading "?".
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.~=&%-]{0,512}$`
	Query string `json:"query,omitempty"`
	// Key of the distributed Secret; default transport_url.
	// +optional
	// +kubebuilder:default=transport_url
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// RabbitMQConfigFile renders "[section]\noption = <transport_url>" under
// a key of the distributed Secret.
type RabbitMQConfigFile struct {
	// Key of the distributed Secret, e.g. 01-nova.conf.
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
	// +optional
	// +kubebuilder:default=DEFAULT
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,64}$`
	Section string `json:"section,omitempty"`
	// +optional
	// +kubebuilder:default=transport_url
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,64}$`
	Option string `json:"option,omitempty"`
}
