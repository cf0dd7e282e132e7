package plugin

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"rekey.io/rekey/internal/backend/mysql"
)

func newShowCommand(a *app) *cobra.Command {
	var user, format string
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Print one user's password as consumers get it (the only command that prints secrets)",
		Long: `show reads the set's first distribution Secret, which holds what consumers
are given: the current passwords, or the new ones from the moment a rotation
distributed them. Formats: plain (the password), mycnf ([client] section),
env (MYSQL_USER / MYSQL_PASSWORD, shell-quoted).`,
		Example: `  kubectl rekey show moco -n shop --user moco-readonly --format mycnf > ~/.my.cnf`,
		Args:    nameArg("show"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, ok := formats[format]; !ok {
				return fmt.Errorf("unknown format %q: use plain, mycnf or env", format)
			}
			s, err := a.session()
			if err != nil {
				return err
			}
			return s.show(cmd.Context(), args[0], user, format)
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "the MySQL user (NAME or NAME@HOST); required when the set has several")
	cmd.Flags().StringVar(&format, "format", "plain", "output format: plain, mycnf or env")
	return cmd
}

func (s *session) show(ctx context.Context, name, user, format string) error {
	cs, err := s.getSet(ctx, name)
	if err != nil {
		return err
	}
	if cs.Spec.MySQL == nil {
		return fmt.Errorf("credentialset %q has no spec.mysql, the only backend this plugin knows", cs.Name)
	}
	if len(cs.Spec.Distribution) == 0 {
		return fmt.Errorf("credentialset %q has no distribution target (spec.distribution is empty), so no Secret outside the operator's namespace holds its passwords: add one to spec.distribution", cs.Name)
	}
	users, err := mysql.ResolveUsers(cs.Spec.MySQL)
	if err != nil {
		return fmt.Errorf("credentialset %q: %w", cs.Name, err)
	}
	u, err := pickUser(cs.Name, users, user)
	if err != nil {
		return err
	}
	t := cs.Spec.Distribution[0]
	sec := &corev1.Secret{}
	err = s.c.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Name}, sec)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("distribution Secret %s/%s does not exist yet: the operator writes it once the set is provisioned (kubectl rekey status %s)", t.Namespace, t.Name, cs.Name)
	}
	if err != nil {
		return fmt.Errorf("read distribution Secret %s/%s: %w", t.Namespace, t.Name, err)
	}
	pw, ok := sec.Data[u.Key]
	if !ok || len(pw) == 0 {
		return fmt.Errorf("distribution Secret %s/%s has no key %s for user %s: the operator has not distributed it yet (kubectl rekey status %s)", t.Namespace, t.Name, u.Key, u, cs.Name)
	}
	text, err := formats[format](u.Name, string(pw))
	if err != nil {
		return err
	}
	if st := cs.Status; st.RotationID != "" && st.RotateApplied {
		// On stderr, so that redirected output stays a clean credential.
		fmt.Fprintf(s.opts.Err, "note: rotation %s is active; this is its new password (the old one works until discard)\n", cs.Status.RotationID)
	}
	_, err = fmt.Fprint(s.opts.Out, text)
	return err
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
