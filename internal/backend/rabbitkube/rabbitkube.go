// Package rabbitkube builds the RabbitMQ backend for a CredentialSet from
// what Kubernetes holds (the admin, CA and adopted Secrets, the other sets
// on the broker), says how the kubectl plugin describes RabbitMQ sets, and
// registers it.
package rabbitkube

import (
	"context"
	"net"
	"net/url"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/rabbitmq"
	"rekey.io/rekey/internal/backend/registry"
	"rekey.io/rekey/internal/engine"
)

func init() { registry.Register(Entry) }

// Entry is the RabbitMQ backend's registration.
var Entry = registry.Entry{
	Kind:           "rabbitmq",
	Field:          "spec.rabbitmq",
	Selects:        func(cs *v1.CredentialSet) bool { return cs.Spec.RabbitMQ != nil },
	WritesNoSecret: true,
	Build:          build,
	// The management endpoint, "rabbitmq:<host>:<port>".
	LockKeys: func(cs *v1.CredentialSet) []string {
		return []string{"rabbitmq:" + endpointHost(cs.Spec.RabbitMQ.Endpoint)}
	},
	Describe: describe,
	// One user per generation, named after the base.
	Identities: func(cs *v1.CredentialSet) string {
		return "RabbitMQ users " + cs.Spec.RabbitMQ.User.Base + "-g<N>"
	},
}

// build makes the RabbitMQ backend from the admin Secret.
func build(ctx context.Context, cs *v1.CredentialSet, k registry.Kube, _ registry.Options) (*registry.Plan, error) {
	spec := cs.Spec.RabbitMQ
	ref := spec.Admin
	user, err := k.SecretKey(ctx, ref.SecretRef.Name, ref.UsernameSecretKey())
	if err != nil {
		return nil, err
	}
	password, err := k.SecretKey(ctx, ref.SecretRef.Name, ref.PasswordSecretKey())
	if err != nil {
		return nil, err
	}
	var ca []byte
	if spec.TLS != nil && spec.TLS.CASecretRef != nil {
		pem, err := k.SecretKey(ctx, spec.TLS.CASecretRef.Name, spec.TLS.CASecretRef.Key)
		if err != nil {
			return nil, err
		}
		ca = []byte(pem)
	}
	// The set's UID marks every user rekey creates for it: users without it
	// (another set's, another tenant's) are never changed or deleted.
	b, err := rabbitmq.New(spec, string(cs.UID), user, password, ca)
	if err != nil {
		return nil, &registry.SpecError{Msg: err.Error()}
	}
	sets, err := k.Sets(ctx)
	if err != nil {
		return nil, err
	}
	// A user several sets adopted is deleted by the last set that holds
	// it; marks of sets that no longer exist are not waited for.
	live := map[string]bool{}
	for _, o := range sets {
		live[string(o.UID)] = true
	}
	b.LiveOwner = func(uid string) bool { return live[uid] }
	b.Fence, b.Term = k.Fence, k.FenceTerm()
	p := &registry.Plan{Backend: b}
	if !cs.DeletionTimestamp.IsZero() {
		// Deleting only removes what the set holds: no refusal may keep
		// a set (and its namespace) from going.
		return p, nil
	}
	if err := uniqueUsers(ctx, cs, b, sets); err != nil {
		return nil, err
	}
	if a := spec.Adopt; a != nil && cs.Status.KeyGeneration == 0 {
		// Proven before provisioning records anything: a wrong password
		// is refused with nothing stored, changed or distributed, and
		// fixing the Secret is all it takes to go on.
		pw, err := k.SecretKey(ctx, a.PasswordSecretRef.Name, a.PasswordSecretRef.Key)
		if err != nil {
			return nil, err
		}
		if err := b.ProveAdoption(ctx, pw); err != nil {
			return nil, err
		}
		p.Adopt = engine.Secrets{rabbitmq.KeyUsername: a.User, rabbitmq.KeyPassword: pw}
	}
	return p, nil
}

// endpointHost is host:port of a management URL, the scheme's default port
// when it names none.
func endpointHost(endpoint string) string {
	u, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil || u.Host == "" {
		return strings.ToLower(endpoint)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
