package ceph

import (
	"strings"
	"testing"
)

// FuzzParseKeyring: keyrings come from Secrets anyone with access may
// edit. Parsing never panics, an accepted keyring renders back to itself,
// and an error never quotes the text (it is key material).
func FuzzParseKeyring(f *testing.F) {
	f.Add("[client.admin]\n\tkey = AQBm0hlnAAAAABAAq3cM3eQ5w2T9u2JpH7uSbw==\n")
	f.Add("[client.a]\nkey=AQBm0hlnAAAAABAAq3cM3eQ5w2T9u2JpH7uSbw==\ncaps mon = \"allow *\"\n")
	f.Add("[client.a]\n\tkey = not base64!\n")
	f.Add("[client.a]\n[client.b]\n\tkey = AQBm0hlnAAAAABAAq3cM3eQ5w2T9u2JpH7uSbw==\n")
	f.Fuzz(func(t *testing.T, text string) {
		k, err := ParseKeyring(text)
		if err != nil {
			// Section headers name entities and may be quoted; values
			// (keys, caps) may not.
			for _, line := range strings.Split(text, "\n") {
				_, v, ok := strings.Cut(line, "=")
				if v = strings.TrimSpace(v); ok && len(v) >= 8 && strings.Contains(err.Error(), v) {
					t.Fatalf("error quotes a keyring value %q: %v", v, err)
				}
			}
			return
		}
		again, err := ParseKeyring(k.String())
		if err != nil || again != k {
			t.Fatalf("%+v renders to a keyring that reads back as %+v (%v)", k, again, err)
		}
		if strings.ContainsAny(k.Entity, "[]\n") || strings.ContainsAny(k.Key, " \n[]") {
			t.Fatalf("accepted a keyring whose entity or key could break the file: %+v", k)
		}
	})
}
