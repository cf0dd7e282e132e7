package ceph

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// Keyring is one entity's cephx key in the keyring file format the ceph
// CLI and every Ceph client read. It is what a source Secret value holds.
type Keyring struct {
	Entity string
	Key    string
}

// String is the keyring file text. The key is validated base64 (see
// validKey), so it cannot carry a newline or a section into the file.
func (k Keyring) String() string {
	return fmt.Sprintf("[%s]\n\tkey = %s\n", k.Entity, k.Key)
}

// ParseKeyring reads the single section that holds a key. Errors never
// quote the text: it is key material.
func ParseKeyring(text string) (Keyring, error) {
	sections, err := parseSections(text)
	if err != nil {
		return Keyring{}, err
	}
	if len(sections) != 1 {
		return Keyring{}, fmt.Errorf("keyring has %d sections with a key, want exactly one", len(sections))
	}
	return sections[0], nil
}

// parseKeyringFor reads entity's section from a keyring that may hold
// others too (an admin keyring written by another tool).
func parseKeyringFor(text, entity string) (Keyring, error) {
	sections, err := parseSections(text)
	if err != nil {
		return Keyring{}, err
	}
	for _, s := range sections {
		if s.Entity == entity {
			return s, nil
		}
	}
	return Keyring{}, fmt.Errorf("keyring has no [%s] section with a key", entity)
}

func parseSections(text string) ([]Keyring, error) {
	var (
		out      []Keyring
		current  string
		sections int
		line     int
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line++
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			sections++
			// Sections rekey never reads (mon., a daemon's own) are
			// skipped, not refused: an admin keyring may carry them.
			current = strings.TrimSpace(l[1 : len(l)-1])
			if !validEntity(current) {
				current = ""
			}
		default:
			name, value, ok := strings.Cut(l, "=")
			if !ok || strings.TrimSpace(name) != "key" {
				continue // caps and other settings matter to the mon, not here
			}
			if sections == 0 {
				return nil, fmt.Errorf("keyring line %d: key outside a section", line)
			}
			if current == "" {
				continue
			}
			key := strings.TrimSpace(value)
			if !validKey(key) {
				return nil, fmt.Errorf("keyring line %d: the key of [%s] is not a base64 cephx key", line, current)
			}
			out = append(out, Keyring{Entity: current, Key: key})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("keyring unreadable: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("keyring holds no key")
	}
	return out, nil
}

// validKey accepts what ceph prints as a key: standard base64 of at least a
// key header and a secret. Ceph itself checks the structure.
func validKey(k string) bool {
	b, err := base64.StdEncoding.DecodeString(k)
	return err == nil && len(b) >= 16
}

// validEntity accepts TYPE.ID with the characters the CRD allows; names go
// to the CLI as separate arguments, never through a shell, but they also
// name files and Secret keys.
func validEntity(e string) bool {
	typ, id, ok := strings.Cut(e, ".")
	if !ok || id == "" || len(e) > 128 || strings.IndexByte("-.", id[0]) >= 0 {
		return false
	}
	switch typ {
	case "client", "mgr", "mds", "osd", "mon":
	default:
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.", r)) {
			return false
		}
	}
	return true
}

// entityID is the name without its type, what `--id` and Ceph-CSI's userID
// take: client.csi.3 → csi.3.
func entityID(e string) string {
	_, id, _ := strings.Cut(e, ".")
	return id
}

// generationOf tells whether entity is a generation of base under
// Overlapping rotation, and which: base itself is generation 0 (a key that
// existed before rekey), base.N is generation N ≥ 1.
func generationOf(base, entity string) (int64, bool) {
	if entity == base {
		return 0, true
	}
	rest, ok := strings.CutPrefix(entity, base+".")
	if !ok || rest == "" || rest[0] == '0' {
		return 0, false
	}
	for _, r := range rest {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil
}
