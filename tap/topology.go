package tap

import (
	"fmt"
	"strings"
)

// Alias marks the interfaces inaemu made (IFLA_IFALIAS), so Down removes
// only those.
const Alias = "inaemu"

// DefaultPrefix names the interfaces when the user gives no --prefix.
const DefaultPrefix = "ina"

// DefaultMTU is the interfaces' MTU: above every RoCE path MTU plus its
// headers, so the bridge never drops a 4096-byte-payload frame.
const DefaultMTU = 9000

// Topology names the interfaces of one star: for each rank r, the switch's
// port PREFIX-swR, the host's NIC PREFIX-hR and the bridge PREFIX-brR that
// joins them (the link).
type Topology struct {
	Prefix  string
	Workers int
	// Wired: no bridges. A wire (a process with a raw socket on each TAP,
	// see OpenSocket) carries frames between PREFIX-hR and PREFIX-swR.
	Wired bool
}

// Validate checks that every name fits Linux's 15 characters.
func (t Topology) Validate() error {
	if t.Workers < 1 || t.Workers > 250 {
		return fmt.Errorf("--workers %d: want 1..250", t.Workers)
	}
	if t.Prefix == "" || strings.ContainsAny(t.Prefix, "/ \t\n:") {
		return fmt.Errorf("--prefix %q: want a plain interface-name prefix", t.Prefix)
	}
	if n := len(t.Bridge(t.Workers - 1)); n > 15 {
		return fmt.Errorf("--prefix %q: interface %s is %d characters; Linux allows 15", t.Prefix, t.Bridge(t.Workers-1), n)
	}
	return nil
}

// SwitchPort is the TAP backing switch port r.
func (t Topology) SwitchPort(r int) string { return fmt.Sprintf("%s-sw%d", t.Prefix, r) }

// Host is the TAP backing host r's NIC.
func (t Topology) Host(r int) string { return fmt.Sprintf("%s-h%d", t.Prefix, r) }

// Bridge is the bridge joining host r and switch port r.
func (t Topology) Bridge(r int) string { return fmt.Sprintf("%s-br%d", t.Prefix, r) }

// Bridges lists every bridge (the interfaces to capture on).
func (t Topology) Bridges() []string {
	var b []string
	for r := 0; r < t.Workers; r++ {
		b = append(b, t.Bridge(r))
	}
	return b
}

// ownedName reports whether name is PREFIX-swN, PREFIX-hN or PREFIX-brN.
func ownedName(prefix, name string) bool {
	rest, ok := strings.CutPrefix(name, prefix+"-")
	if !ok {
		return false
	}
	for _, kind := range []string{"sw", "h", "br"} {
		if num, ok := strings.CutPrefix(rest, kind); ok && num != "" && strings.Trim(num, "0123456789") == "" {
			return true
		}
	}
	return false
}
