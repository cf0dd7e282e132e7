package ceph

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		name        string
		args        []string
		words, opts []string
	}{
		{"words only", []string{"auth", "get", "client.a"}, []string{"auth", "get", "client.a"}, nil},
		{"json output split off", []string{"auth", "ls", "--format", "json"}, []string{"auth", "ls"}, []string{"--format", "json"}},
		// Any other option stays in words, where checkArgs refuses it.
		{"another option stays in words", []string{"auth", "ls", "--keyring", "/x"}, []string{"auth", "ls", "--keyring", "/x"}, nil},
		{"json then more stays in words", []string{"auth", "ls", "--format", "json", "-c", "/x"}, []string{"auth", "ls", "--format", "json", "-c", "/x"}, nil},
		{"plain format stays in words", []string{"auth", "ls", "--format", "plain"}, []string{"auth", "ls", "--format", "plain"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			words, opts := splitArgs(tc.args)
			if !slices.Equal(words, tc.words) || !slices.Equal(opts, tc.opts) {
				t.Fatalf("splitArgs(%q) = %q, %q; want %q, %q", tc.args, words, opts, tc.words, tc.opts)
			}
		})
	}
}

func TestCleanEnvDropsCephVariables(t *testing.T) {
	t.Setenv("CEPH_ARGS", "--keyring /other")
	t.Setenv("CEPH_CONF", "/other/ceph.conf")
	t.Setenv("CEPH_KEYRING", "/other/keyring")
	t.Setenv("CEPH_ARGS_NOT", "kept")
	env := cleanEnv()
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name == "CEPH_ARGS" || name == "CEPH_CONF" || name == "CEPH_KEYRING" {
			t.Errorf("cleanEnv keeps %s", kv)
		}
	}
	if !slices.Contains(env, "CEPH_ARGS_NOT=kept") {
		t.Errorf("cleanEnv dropped a variable the ceph CLI does not read: %q", env)
	}
}
