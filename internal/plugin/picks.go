package plugin

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	v1 "rekey.io/rekey/api/v1alpha1"
	"rekey.io/rekey/internal/backend/registry"
)

// pickFlag is one of show's flags that pick an identity of a set, and the
// backends whose identities it picks. The backends name them (their
// Show.Pick): --user for MySQL users and PostgreSQL logins, --entity for
// Ceph entities, as scripts have always called them.
type pickFlag struct {
	name  string
	by    []registry.Describe
	value string
}

// pickFlags are show's identity flags, one per name the registered
// backends pick with, in the order of the backends' help rows.
func pickFlags() []*pickFlag {
	var out []*pickFlag
	for _, d := range rankedDescribes() {
		p := d.Show.Pick
		if p == nil {
			continue
		}
		i := 0
		for i < len(out) && out[i].name != p.Flag {
			i++
		}
		if i == len(out) {
			out = append(out, &pickFlag{name: p.Flag})
		}
		out[i].by = append(out[i].by, d)
	}
	return out
}

// rankedDescribes are the registered backends' descriptions, in the
// order of their help rows.
func rankedDescribes() []registry.Describe {
	entries := registry.Entries()
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Describe.Rank < entries[j].Describe.Rank })
	var out []registry.Describe
	for _, e := range entries {
		out = append(out, e.Describe)
	}
	return out
}

func (f *pickFlag) bind(cmd *cobra.Command) {
	var whats []string
	for _, d := range f.by {
		w := "the " + d.Name + " " + d.Show.Pick.Noun
		if form := d.Show.Pick.Form; form != "" {
			w += " (" + form + ")"
		}
		whats = append(whats, w)
	}
	cmd.Flags().StringVar(&f.value, f.name, "", registry.OneOf(whats)+"; required when the set has several")
}

// what is what the flag picks, in a refusal: "a Ceph entity".
func (f *pickFlag) what() string {
	var whats []string
	for _, d := range f.by {
		whats = append(whats, article(d.Name)+" "+d.Name+" "+d.Show.Pick.Noun)
	}
	return registry.OneOf(whats)
}

// article is "a", or "an" before a name that starts with a vowel.
func article(name string) string {
	if name != "" && strings.ContainsRune("AEIOUaeiou", rune(name[0])) {
		return "an"
	}
	return "a"
}

// pickFor is the identity the flags pick in cs, a set of backend d. A flag
// that picks another backend's identities is refused, naming the one that
// picks d's (or saying there is none to pick).
func pickFor(cs *v1.CredentialSet, d registry.Describe, flags []*pickFlag) (string, error) {
	own := ""
	if d.Show.Pick != nil {
		own = d.Show.Pick.Flag
	}
	for _, f := range flags {
		if f.value == "" || f.name == own {
			continue
		}
		if own == "" {
			one := d.Show.One
			if one == "" {
				one = "one identity"
			}
			return "", fmt.Errorf("credentialset %q is %s %s set with %s, so show takes no --%s: drop it", cs.Name, article(d.Name), d.Name, one, f.name)
		}
		fix := "drop it"
		if d.Show.Pick.Choices != nil {
			if choices := d.Show.Pick.Choices(cs); len(choices) > 0 {
				fix = fmt.Sprintf("pick the %s with --%s (%s)", d.Show.Pick.Noun, own, strings.Join(choices, ", "))
			}
		}
		return "", fmt.Errorf("--%s picks %s, but credentialset %q is %s %s set: %s", f.name, f.what(), cs.Name, article(d.Name), d.Name, fix)
	}
	for _, f := range flags {
		if f.name == own {
			return f.value, nil
		}
	}
	return "", nil
}
