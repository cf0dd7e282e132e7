package v1alpha1

import "cmp"

// The API's defaults. The CRD applies them at admission (the
// +kubebuilder:default markers, which cannot name a Go constant: a test
// compares the generated CRD with these), but an object built in Go, or
// stored before a default existed, reaches the operator with the field
// empty. Code reads these fields through the accessors below, never
// directly, so that every reader applies the same default.
const (
	DefaultCephAdminEntity       = "client.admin"
	DefaultCephStrategy          = CephInPlace
	DefaultCephKeepPriorKeyCount = int32(1)

	DefaultMySQLPort     = int32(3306)
	DefaultMySQLUserHost = "%"
	DefaultMySQLTLS      = "Required"

	DefaultRabbitMQUsernameKey = "username"
	DefaultRabbitMQPasswordKey = "password"
	DefaultTransportURLScheme  = "rabbit"
	DefaultTransportURLKey     = "transport_url"
	DefaultConfigFileSection   = "DEFAULT"
	DefaultConfigFileOption    = "transport_url"
)

// AdminEntity is the entity rekey runs the ceph CLI as.
func (s *CephSpec) AdminEntity() string { return cmp.Or(s.Admin.Entity, DefaultCephAdminEntity) }

// RotationStrategy is the set's strategy; an unknown value is returned as
// is, for the backend to refuse.
func (s *CephSpec) RotationStrategy() CephStrategy { return cmp.Or(s.Strategy, DefaultCephStrategy) }

// PriorKeysKept is how many prior generations' entities discard keeps
// (meaningful for Overlapping only; admission refuses it with InPlace,
// so it has no CRD default).
func (s *CephSpec) PriorKeysKept() int32 {
	if s.KeepPriorKeyCount != nil {
		return *s.KeepPriorKeyCount
	}
	return DefaultCephKeepPriorKeyCount
}

// PortNumber is the mysqld port of every pod of the StatefulSet.
func (s *StatefulSetInstances) PortNumber() int32 { return cmp.Or(s.Port, DefaultMySQLPort) }

// AccountHost is the host part of the user's account.
func (u *MySQLUser) AccountHost() string { return cmp.Or(u.Host, DefaultMySQLUserHost) }

// TLSMode is how rekey's MySQL connections use TLS.
func (s *MySQLSpec) TLSMode() string { return cmp.Or(s.TLS, DefaultMySQLTLS) }

// UsernameSecretKey is the admin Secret's key holding the user name.
func (a *RabbitMQAdmin) UsernameSecretKey() string {
	return cmp.Or(a.UsernameKey, DefaultRabbitMQUsernameKey)
}

// PasswordSecretKey is the admin Secret's key holding the password.
func (a *RabbitMQAdmin) PasswordSecretKey() string {
	return cmp.Or(a.PasswordKey, DefaultRabbitMQPasswordKey)
}

// URLScheme is the transport_url's scheme.
func (t *RabbitMQTransportURL) URLScheme() string { return cmp.Or(t.Scheme, DefaultTransportURLScheme) }

// SecretKey is the distributed Secret's key the transport_url is
// rendered under.
func (t *RabbitMQTransportURL) SecretKey() string { return cmp.Or(t.Key, DefaultTransportURLKey) }

// SectionName is the config file's section holding the option.
func (c *RabbitMQConfigFile) SectionName() string { return cmp.Or(c.Section, DefaultConfigFileSection) }

// OptionName is the config file's option set to the transport_url.
func (c *RabbitMQConfigFile) OptionName() string { return cmp.Or(c.Option, DefaultConfigFileOption) }
