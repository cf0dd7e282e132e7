package registry

import "testing"

// TestShowRendering: what show prints of a value keeps it as it is: one
// newline after a plain value (even one that ends in a newline itself),
// none added to a keyring that has it, and shell quoting that survives
// quotes and backslashes.
func TestShowRendering(t *testing.T) {
	if got, _ := PlainLine([]string{"pw\n"}); got != "pw\n\n" {
		t.Errorf("PlainLine = %q", got)
	}
	for in, want := range map[string]string{"[client.a]\n\tkey = k\n": "[client.a]\n\tkey = k\n", "k": "k\n"} {
		if got := EndLine(in); got != want {
			t.Errorf("EndLine(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{`it's \d`: `'it'\''s \d'`, "": "''"} {
		if got := Quoted(in); got != want {
			t.Errorf("Quoted(%q) = %q, want %q", in, got, want)
		}
	}
}
