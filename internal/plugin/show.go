package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/mysql"
	"rekey.io/rekey/internal/naming"
)

// showFlags are show's choices: which identity, and how to print it.
type showFlags struct {
	user, entity, format string
	// print is -o: the credential as an object (json, yaml, jsonpath=...)
	// instead of --format's text.
	print *genericclioptions.PrintFlags
}

func newShowCommand(a *app) *cobra.Command {
	f := showFlags{print: genericclioptions.NewPrintFlags("")}
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Print one credential as consumers get it (the only command that prints secrets)",
		Long: `show reads the set's first distribution Secret, which holds what consumers
are given: the current credentials, or the new ones from the moment a rotation
distributed them. Formats, by backend:
  MySQL     plain (the password), mycnf ([client] section), env (MYSQL_USER /
            MYSQL_PASSWORD); --user picks the user when the set has several
  Ceph      plain (the key), keyring (the keyring file), env (CEPH_NAME, the
            entity for --name; CEPH_ID, for --id; CEPH_KEY); --entity picks
            the entity when the set has several
  RabbitMQ  plain (the password), env (RABBITMQ_USERNAME / RABBITMQ_PASSWORD),
            url (the transport_url, for sets that render one)
env output is shell-quoted, so it can be sourced.
-o json, yaml, jsonpath=... or go-template=... print the credential as an
object instead: kind Credential (printed by the plugin, not an API resource)
with the set, the identity, the active rotation if any, the distribution
Secret it was read from and, under values, what --format env prints.`,
		Example: `  kubectl rekey show moco -n shop --user moco-readonly --format mycnf > ~/.my.cnf
  kubectl rekey show ceph-csi -n rook-ceph --entity client.csi-rbd --format keyring
  kubectl rekey show nova-transport -n openstack --format url
  kubectl rekey show orders -n shop --user orders -o jsonpath='{.values.MYSQL_PASSWORD}'`,
		Args: nameArg("show"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.session()
			if err != nil {
				return err
			}
			return s.show(cmd.Context(), args[0], f)
		},
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if *f.print.OutputFormat != "" && cmd.Flags().Changed("format") {
				return fmt.Errorf("--format and -o both choose the output: use one")
			}
			return nil
		},
	}
	f.print.AddFlags(cmd)
	if o := cmd.Flags().Lookup("output"); o != nil {
		o.Usage = "print the credential as an object: " + strings.Join(f.print.AllowedFormats(), ", ") + " (default: --format's text)"
	}
	cmd.Flags().StringVar(&f.user, "user", "", "the MySQL user (NAME or NAME@HOST); required when the set has several")
	cmd.Flags().StringVar(&f.entity, "entity", "", "the Ceph entity (e.g. client.csi); required when the set has several")
	// The per-backend formats are in the long help: this text is what
	// users of MySQL sets have always seen.
	cmd.Flags().StringVar(&f.format, "format", "plain", "output format: plain, mycnf or env")
	return cmd
}

// credential is one identity's secret as show prints it: the distribution
// Secret keys it reads and how their values become the output.
type credential struct {
	who    string // in errors, e.g. "user orders@%" or "entity client.csi"
	keys   []string
	render func(vals []string) (string, error)
	// note says, on stderr during an active rotation, what the printed
	// credential is and what became of the old one.
	note string
	// fields are the name/value pairs --format env prints (and -o's values).
	fields func(vals []string) []string
}

// showFormats are each backend's formats, in the order help lists them.
var showFormats = map[string][]string{
	"MySQL":    {"plain", "mycnf", "env"},
	"Ceph":     {"plain", "keyring", "env"},
	"RabbitMQ": {"plain", "env", "url"},
}

func (s *session) show(ctx context.Context, name string, f showFlags) error {
	cs, err := s.getSet(ctx, name)
	if err != nil {
		return err
	}
	cs = asMOCO(cs)
	if cs.Spec.MySQL == nil && cs.Spec.Ceph == nil && cs.Spec.RabbitMQ == nil {
		return fmt.Errorf("credentialset %q has no backend block (spec.mysql, spec.ceph or spec.rabbitmq), so it has no credential to show", cs.Name)
	}
	var printer printers.ResourcePrinter
	if *f.print.OutputFormat != "" {
		if printer, err = f.print.ToPrinter(); err != nil {
			if genericclioptions.IsNoCompatiblePrinterError(err) {
				return fmt.Errorf("unknown output format %q: use %s", *f.print.OutputFormat, strings.Join(f.print.AllowedFormats(), ", "))
			}
			return err
		}
		f.format = "env" // the credential's fields, as env names them
	}
	if err := checkFormat(cs, f.format); err != nil {
		return err
	}
	if len(cs.Spec.Distribution) == 0 {
		return fmt.Errorf("credentialset %q has no distribution target (spec.distribution is empty), so no Secret outside the operator's namespace holds its %s: add one to spec.distribution", cs.Name, secretWord(cs))
	}
	var c credential
	switch {
	case cs.Spec.Ceph != nil:
		c, err = cephCredential(cs, f)
	case cs.Spec.RabbitMQ != nil:
		c, err = rabbitCredential(cs, f)
	default:
		c, err = mysqlCredential(cs, f)
	}
	if err != nil {
		return err
	}
	t, ok := nativeTarget(cs)
	if !ok {
		return fmt.Errorf("every distribution target of credentialset %q is in a ceph-csi format (userID/userKey), which show does not read: read the key with kubectl get secret -n %s %s -o jsonpath='{.data.userKey}' | base64 -d, or add a target without format to spec.distribution", cs.Name, t.Namespace, t.Name)
	}
	sec := &corev1.Secret{}
	err = s.c.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Name}, sec)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("distribution Secret %s/%s does not exist yet: the operator writes it once the set is provisioned (kubectl rekey status %s)", t.Namespace, t.Name, cs.Name)
	}
	if err != nil {
		return fmt.Errorf("read distribution Secret %s/%s: %w", t.Namespace, t.Name, err)
	}
	var vals []string
	for _, k := range c.keys {
		v, ok := sec.Data[k]
		if !ok || len(v) == 0 {
			return fmt.Errorf("distribution Secret %s/%s has no key %s for %s: the operator has not distributed it yet (kubectl rekey status %s)", t.Namespace, t.Name, k, c.who, cs.Name)
		}
		vals = append(vals, string(v))
	}
	if printer != nil {
		return printer.PrintObj(credentialObject(cs, t, c, vals), s.opts.Out)
	}
	if c.render == nil {
		c.render = func(v []string) (string, error) { return envLines(c.fields(v)...), nil }
	}
	text, err := c.render(vals)
	if err != nil {
		return err
	}
	if st := cs.Status; st.RotationID != "" && st.RotateApplied {
		// On stderr, so that redirected output stays a clean credential.
		fmt.Fprintf(s.opts.Err, "note: rotation %s is active; %s\n", st.RotationID, c.note)
	}
	_, err = fmt.Fprint(s.opts.Out, text)
	return err
}

// checkFormat accepts the formats of the set's backend. MySQL's message
// is the one it always was.
func checkFormat(cs *v1.CredentialSet, format string) error {
	b := backendName(cs)
	list := showFormats[b]
	if slices.Contains(list, format) {
		return nil
	}
	use := strings.Join(list[:len(list)-1], ", ") + " or " + list[len(list)-1]
	if b == "MySQL" {
		return fmt.Errorf("unknown format %q: use %s", format, use)
	}
	return fmt.Errorf("unknown format %q for a %s set: use %s", format, b, use)
}

func mysqlCredential(cs *v1.CredentialSet, f showFlags) (credential, error) {
	if f.entity != "" {
		return credential{}, fmt.Errorf("--entity picks a Ceph entity, but credentialset %q is a MySQL set: pick the user with --user", cs.Name)
	}
	users, err := mysql.ResolveUsers(cs.Spec.MySQL)
	if err != nil {
		return credential{}, fmt.Errorf("credentialset %q: %w", cs.Name, err)
	}
	u, err := pickUser(cs.Name, users, f.user)
	if err != nil {
		return credential{}, err
	}
	c := credential{who: "user " + u.String(), keys: []string{u.Key},
		note: "this is its new password (the old one works until discard)"}
	switch f.format {
	case "mycnf":
		c.render = func(v []string) (string, error) { return mycnfClient(u.Name, v[0]) }
	case "env":
		c.fields = func(v []string) []string { return []string{"MYSQL_USER", u.Name, "MYSQL_PASSWORD", v[0]} }
	default:
		c.render = plainLine
	}
	return c, nil
}

// cephCredential reads what the Ceph backend renders per entity.
func cephCredential(cs *v1.CredentialSet, f showFlags) (credential, error) {
	var names []string
	for _, e := range cs.Spec.Ceph.Entities {
		names = append(names, e.Name)
	}
	if f.user != "" {
		return credential{}, fmt.Errorf("--user picks a MySQL user, but credentialset %q is a Ceph set: pick the entity with --entity (%s)", cs.Name, strings.Join(names, ", "))
	}
	e, err := pickEntity(cs.Name, names, f.entity)
	if err != nil {
		return credential{}, err
	}
	c := credential{who: "entity " + e,
		note: "this is its new key (the old one stopped working when Ceph rotated it: InPlace)"}
	if cephOverlapping(cs) {
		c.note = fmt.Sprintf("this is the key of its new entity %s.%d (the prior entity works until discard, and after it as keepPriorKeyCount %d says)",
			e, targetGeneration(cs), keepPriorKeyCount(cs))
	}
	switch f.format {
	case "keyring":
		c.keys = []string{naming.CephKeyringKey(e)}
		c.render = func(v []string) (string, error) { return endLine(v[0]), nil }
	case "env":
		c.keys = []string{naming.CephNameKey(e), naming.CephIDKey(e), naming.CephKeyKey(e)}
		c.fields = func(v []string) []string { return []string{"CEPH_NAME", v[0], "CEPH_ID", v[1], "CEPH_KEY", v[2]} }
	default:
		c.keys, c.render = []string{naming.CephKeyKey(e)}, plainLine
	}
	return c, nil
}

// rabbitCredential reads what the RabbitMQ backend renders: username,
// password and, where the spec asks, the transport_url.
func rabbitCredential(cs *v1.CredentialSet, f showFlags) (credential, error) {
	if f.user != "" || f.entity != "" {
		return credential{}, fmt.Errorf("credentialset %q is a RabbitMQ set with a single user (a new one per generation), so show takes no --user or --entity: drop it", cs.Name)
	}
	c := credential{who: "the RabbitMQ user",
		note: fmt.Sprintf("this is its new user %s (the old user works until discard)", rabbitUser(cs, targetGeneration(cs)))}
	switch f.format {
	case "env":
		c.keys = []string{naming.RabbitMQUsernameKey, naming.RabbitMQPasswordKey}
		c.fields = func(v []string) []string { return []string{"RABBITMQ_USERNAME", v[0], "RABBITMQ_PASSWORD", v[1]} }
	case "url":
		t := cs.Spec.RabbitMQ.TransportURL
		if t == nil {
			return credential{}, fmt.Errorf("credentialset %q renders no transport_url (spec.rabbitmq.transportURL is not set): use --format plain or env, or set transportURL", cs.Name)
		}
		c.keys, c.render = []string{transportKey(t)}, plainLine
	default:
		c.keys, c.render = []string{naming.RabbitMQPasswordKey}, plainLine
	}
	return c, nil
}

// pickUser finds --user among the set's users by NAME or NAME@HOST;
// without --user, a single user is the answer and several are listed.
func pickUser(set string, users []mysql.User, want string) (mysql.User, error) {
	var names []string
	for _, u := range users {
		names = append(names, u.String())
	}
	if want == "" {
		if len(users) == 1 {
			return users[0], nil
		}
		return mysql.User{}, fmt.Errorf("credentialset %q has %d users: choose one with --user (%s)", set, len(users), strings.Join(names, ", "))
	}
	var found []mysql.User
	for _, u := range users {
		if u.Name == want || u.String() == want {
			found = append(found, u)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return mysql.User{}, fmt.Errorf("credentialset %q has no user %q: use one of %s", set, want, strings.Join(names, ", "))
	}
	return mysql.User{}, fmt.Errorf("credentialset %q has user %q on several hosts: say which with --user NAME@HOST (%s)", set, want, strings.Join(names, ", "))
}

// pickEntity finds --entity among the spec's entities; without it, a
// single entity is the answer and several are listed. A generation's
// name (client.csi.3) is not an entity of the spec: the Secret keys are
// named after the spec's.
func pickEntity(set string, names []string, want string) (string, error) {
	switch {
	case want == "" && len(names) == 1:
		return names[0], nil
	case want == "":
		return "", fmt.Errorf("credentialset %q has %d entities: choose one with --entity (%s)", set, len(names), strings.Join(names, ", "))
	case slices.Contains(names, want):
		return want, nil
	}
	return "", fmt.Errorf("credentialset %q has no entity %q: use one of %s", set, want, strings.Join(names, ", "))
}

// credentialObject is show -o's object: kind Credential, which only the
// plugin prints (no API serves it), so that -o json|yaml|jsonpath work on a
// credential as on any kubectl object.
func credentialObject(cs *v1.CredentialSet, from v1.SecretTarget, c credential, vals []string) *unstructured.Unstructured {
	values := map[string]any{}
	pairs := c.fields(vals)
	for i := 0; i+1 < len(pairs); i += 2 {
		values[pairs[i]] = pairs[i+1]
	}
	obj := map[string]any{
		"apiVersion": v1.GroupVersion.String(),
		"kind":       "Credential",
		"metadata":   map[string]any{"name": cs.Name, "namespace": cs.Namespace},
		"backend":    backendName(cs),
		"identity":   c.who,
		"secret":     map[string]any{"namespace": from.Namespace, "name": from.Name},
		"values":     values,
	}
	if st := cs.Status; st.RotationID != "" && st.RotateApplied {
		obj["rotationID"] = st.RotationID
	}
	return &unstructured.Unstructured{Object: obj}
}

// nativeTarget is the first distribution target in the backend's own
// layout, the one show reads; without one, the first target.
func nativeTarget(cs *v1.CredentialSet) (v1.SecretTarget, bool) {
	for _, t := range cs.Spec.Distribution {
		if !t.Format.CephCSI() {
			return t, true
		}
	}
	return cs.Spec.Distribution[0], false
}
