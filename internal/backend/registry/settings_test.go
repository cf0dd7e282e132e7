package registry

import (
	"flag"
	"testing"
)

func TestSettings(t *testing.T) {
	isolate(t)
	Register(Entry{Kind: "a", Flags: []Flag{{Name: "a-cli", Default: "a", Usage: "the a CLI"}, {Name: "a-dir", Usage: "where a writes"}}})
	var s Settings
	if got := s.Value("a-cli"); got != "a" {
		t.Errorf("unset a-cli = %q, want its default a", got)
	}
	s.Set("a-dir", "/var/a")
	if got := s.Value("a-dir"); got != "/var/a" {
		t.Errorf("a-dir = %q after Set", got)
	}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	values := BindFlags(fs)
	if err := fs.Parse([]string{"--a-cli", "/usr/bin/a"}); err != nil {
		t.Fatal(err)
	}
	if got := values(); got.Value("a-cli") != "/usr/bin/a" || got.Value("a-dir") != "" {
		t.Errorf("parsed settings = %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("a flag no backend registered was read")
		}
	}()
	s.Value("a-clj")
}
