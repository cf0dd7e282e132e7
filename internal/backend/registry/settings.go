package registry

import (
	"flag"
	"fmt"
)

// Flag is a manager flag that only one backend reads. A spec never names
// any of them: each is a program to run or a place outside the set's
// namespace that the cluster's operator chose.
type Flag struct {
	// Name is the flag without its dashes ("ceph-cli").
	Name string
	// Default is its value when the manager is not given it.
	Default string
	// Usage is its line in the manager's help.
	Usage string
}

// Settings are the values of the backends' flags, by name; a flag not
// set has its registered default.
type Settings map[string]string

// Value is flag name's value. A name no backend registered is a bug, and
// panics: a misspelt one would otherwise read as empty.
func (s Settings) Value(name string) string {
	f := registered(name)
	if v, ok := s[name]; ok {
		return v
	}
	return f.Default
}

// Set gives flag name a value (tests; the manager parses them).
func (s *Settings) Set(name, v string) {
	registered(name)
	if *s == nil {
		*s = Settings{}
	}
	(*s)[name] = v
}

// registered is the backends' flag name; it panics when none has it.
func registered(name string) Flag {
	for _, e := range Entries() {
		for _, f := range e.Flags {
			if f.Name == name {
				return f
			}
		}
	}
	panic(fmt.Sprintf("no backend registered the flag %q", name))
}

// BindFlags defines every registered backend's flags on fs; once fs is
// parsed, values returns what they were given.
func BindFlags(fs *flag.FlagSet) (values func() Settings) {
	vals := map[string]*string{}
	for _, e := range Entries() {
		for _, f := range e.Flags {
			vals[f.Name] = fs.String(f.Name, f.Default, f.Usage)
		}
	}
	return func() Settings {
		s := Settings{}
		for n, v := range vals {
			s[n] = *v
		}
		return s
	}
}
