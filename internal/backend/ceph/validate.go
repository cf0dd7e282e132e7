package ceph

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	v1 "rekey.io/rekey/api/v1alpha1"
)

// Every value of a spec that reaches the ceph CLI is checked here, although
// the CRD checks the same at admission: a spec that did not pass the API
// server (an older CRD still installed, a client that bypasses it) must not
// be able to turn a value into an option of the CLI or a line of ceph.conf.

// capWord is one word of a cap clause: bare characters (never a leading
// "-", so that no cap can read as an option of the CLI), or quoted
// strings, which ceph's cap grammar takes for command names and regexes.
const (
	capQuoted = `"[ !#-~]*"|'[ -&(-~]*'`
	capWord   = `([A-Za-z0-9_.:/*=@+~]|` + capQuoted + `)([-A-Za-z0-9_.:/*=@+~]|` + capQuoted + `)*`
	capClause = `(allow|profile)( +(` + capWord + `))+`
	// CapPattern is the grammar of a cap string: clauses such as "allow r",
	// "allow rw pool=x namespace=y", "profile rbd pool=rbd", `allow command
	// "config get"`, separated by "," or ";". The CRD carries the same
	// expression (api/v1alpha1/ceph_types.go); a unit test keeps them equal.
	CapPattern = `^ *` + capClause + `( *[,;] *` + capClause + `)* *$`
	maxCapLen  = 512
)

var capRE = regexp.MustCompile(CapPattern)

// ValidateCaps checks one cap string (the value of caps.mon, caps.osd ...).
// The message names the field and says what to write instead; it quotes
// nothing of the value but its first word, which may be hostile.
func ValidateCaps(field, caps string) error {
	switch {
	case caps == "":
		return nil
	case len(caps) > maxCapLen:
		return fmt.Errorf("%s is longer than %d characters", field, maxCapLen)
	case strings.HasPrefix(strings.TrimSpace(caps), "-"):
		return fmt.Errorf("%s begins with \"-\": caps are clauses such as \"allow r\" or \"profile rbd pool=rbd\", never an option", field)
	case strings.IndexFunc(caps, func(r rune) bool { return r < 0x20 || r >= 0x7f }) >= 0:
		return fmt.Errorf("%s holds a control or non-ASCII character: caps are one line of printable ASCII", field)
	case !capRE.MatchString(caps):
		return fmt.Errorf("%s is not a list of cap clauses: write clauses such as \"allow r\", \"allow rw pool=x namespace=y\", \"profile rbd pool=rbd\" or `allow command \"config get\"`, separated by commas; each starts with allow or profile, and words are letters, digits, _.:/*=@+~- (never a leading -) or quoted strings", field)
	}
	return nil
}

// validateEntityCaps checks every cap of e.
func validateEntityCaps(e v1.CephEntity) error {
	for _, p := range [][2]string{{"mon", e.Caps.Mon}, {"osd", e.Caps.OSD}, {"mgr", e.Caps.MGR}, {"mds", e.Caps.MDS}} {
		if err := ValidateCaps("entity "+e.Name+": caps."+p[0], p[1]); err != nil {
			return err
		}
	}
	return nil
}

// configValue is the grammar of an allowed option's value.
type configValue struct {
	re   *regexp.Regexp
	what string
}

var (
	cfgSeconds = configValue{regexp.MustCompile(`^[0-9]{1,6}(\.[0-9]{1,3})?$`), "a number of seconds such as 30 or 2.5"}
	cfgCount   = configValue{regexp.MustCompile(`^[0-9]{1,4}(\.[0-9]{1,3})?$`), "a number such as 3 or 1.5"}
	cfgBool    = configValue{regexp.MustCompile(`^(true|false)$`), "true or false"}
	cfgModes   = configValue{regexp.MustCompile(`^(crc|secure)([ ,](crc|secure))?$`), `"secure", "crc", "secure crc" or "crc secure"`}
	cfgAuth    = configValue{regexp.MustCompile(`^cephx$`), `"cephx"`}
)

// ConfigOptions are the ceph.conf options a spec may set for rekey's
// commands: how a client talks to the monitors (security modes, timeouts,
// address family), nothing that names a file, a socket, a plugin or a
// log, or that changes whom rekey talks to (mon_host and the keyring are
// rekey's own). Anything else is refused rather than filtered: an option
// nobody reviewed may write files or load code in the manager. The CRD
// carries the same list.
var ConfigOptions = map[string]configValue{
	"ms_mon_client_mode":                    cfgModes,
	"ms_client_mode":                        cfgModes,
	"auth_client_required":                  cfgAuth,
	"rados_mon_op_timeout":                  cfgSeconds,
	"rados_osd_op_timeout":                  cfgSeconds,
	"client_mount_timeout":                  cfgSeconds,
	"mon_client_hunt_interval":              cfgSeconds,
	"mon_client_hunt_interval_max_multiple": cfgCount,
	"mon_client_hunt_interval_backoff":      cfgCount,
	"mon_client_hunt_parallel":              cfgCount,
	"mon_client_ping_interval":              cfgSeconds,
	"mon_client_ping_timeout":               cfgSeconds,
	"ms_connection_ready_timeout":           cfgSeconds,
	"ms_bind_ipv4":                          cfgBool,
	"ms_bind_ipv6":                          cfgBool,
}

// ConfigOptionNames lists ConfigOptions, sorted (for messages and docs).
func ConfigOptionNames() []string {
	names := make([]string, 0, len(ConfigOptions))
	for k := range ConfigOptions {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// ValidateConfig checks one spec.ceph.config entry against the allow-list
// and the option's value grammar. A refused name is quoted only when it
// has the shape of an option name, so a hostile key cannot put a line
// break or a key-shaped run into an error.
func ValidateConfig(name, value string) error {
	opt, ok := ConfigOptions[name]
	if !ok {
		shown := "this key"
		if len(name) <= 64 && regexp.MustCompile(`^[a-z][a-z0-9_ ]*$`).MatchString(name) {
			shown = fmt.Sprintf("%q", name)
		}
		return fmt.Errorf("spec.ceph.config: %s is not an option rekey may set (only client connection settings are allowed: %s); remove it", shown, strings.Join(ConfigOptionNames(), ", "))
	}
	if !opt.re.MatchString(value) {
		return fmt.Errorf("spec.ceph.config.%s: the value must be %s", name, opt.what)
	}
	return nil
}

// checkArgs is the last line before exec: every command word is a single
// argument that cannot be read as an option (no leading "-") nor carry a
// line into anything (no control character). The words follow "--" on the
// command line as well; this check does not rely on that.
func checkArgs(words []string) error {
	for i, w := range words {
		if w == "" || strings.HasPrefix(w, "-") || strings.IndexFunc(w, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			return fmt.Errorf("ceph %s: refused to run: argument %d is empty, starts with \"-\" or holds a control character", commandName(words[:min(i, 3)]), i+1)
		}
	}
	return nil
}
