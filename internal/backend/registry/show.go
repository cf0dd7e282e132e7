package registry

import (
	"fmt"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Show is what show prints for a backend's sets.
type Show struct {
	// Formats are the --format values, in the order help lists them.
	Formats []string
	// Unqualified: an unknown format's message does not name the backend
	// (the message MySQL sets always had, which scripts may match).
	Unqualified bool
	// Pick is the flag that picks one of a set's identities. Nil: a set
	// has one (One says which), and show takes no flag to pick it.
	Pick *PickFlag
	// One is, without Pick, the identity every set has, in words ("a
	// single user (a new one per generation)").
	One string
	// Credential is the identity p picks, in p.Format (one of Formats).
	Credential func(cs *v1.CredentialSet, p Pick) (Credential, error)
}

// PickFlag is a show flag that picks one identity of a set. Backends
// whose identities are named alike share one (a MySQL user and a
// PostgreSQL login are both --user): show defines each name once, and
// refuses one the set's backend does not take, in its words.
type PickFlag struct {
	// Flag is its name ("user"), Noun one identity in words ("user"),
	// Form how a value names one, for the flag's help ("NAME or
	// NAME@HOST"; "": the noun says it).
	Flag, Noun, Form string
	// Choices are the values that pick each of the set's identities, for
	// messages; none when the set's one identity needs no picking.
	Choices func(cs *v1.CredentialSet) []string
}

// Pick is show's choice: the value of the backend's PickFlag ("": none
// given) and the format.
type Pick struct{ Identity, Format string }

// Credential is one identity's secret as show prints it: the distribution
// Secret keys it reads and how their values become the output.
type Credential struct {
	// Who names it in errors ("user orders@%", "entity client.csi").
	Who  string
	Keys []string
	// Render makes the output from the values of Keys; nil: Fields as
	// NAME=value lines.
	Render func(vals []string) (string, error)
	// Note says, during an active rotation, what the printed credential
	// is and what became of the old one.
	Note string
	// Fields are the name/value pairs --format env prints (and -o's values).
	Fields func(vals []string) []string
}

// PlainLine prints the one value read, as it is, and a newline (always: a
// value that ends in a newline itself must still show it).
func PlainLine(v []string) (string, error) { return v[0] + "\n", nil }

// EndLine ends text with exactly the newline it lacks, if any: a keyring
// file already ends in one.
func EndLine(text string) string {
	if strings.HasSuffix(text, "\n") {
		return text
	}
	return text + "\n"
}

// Quoted is s in single quotes, as a shell reads it: regular expressions
// keep their backslashes, and an empty one stays visible.
func Quoted(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// UnknownFormat refuses a --format the backend does not print.
func (s Show) UnknownFormat(name, format string) error {
	use := OneOf(s.Formats)
	if s.Unqualified {
		return fmt.Errorf("unknown format %q: use %s", format, use)
	}
	return fmt.Errorf("unknown format %q for a %s set: use %s", format, name, use)
}
