package topo

import (
	"fmt"
	"strconv"
	"strings"
)

// The places a rank can run on are named after their host: a host's first
// NIC is the host's own name, its p-th NIC host:nicP, its g-th GPU
// host:gpuG. Jobs, scenarios and the NICs themselves all spell them so.

// NICName names host's NIC p (the NIC on its p-th link).
func NICName(host string, p int) string {
	if p == 0 {
		return host
	}
	return fmt.Sprintf("%s:nic%d", host, p)
}

// GPUName names host's GPU g.
func GPUName(host string, g int) string { return fmt.Sprintf("%s:gpu%d", host, g) }

// GPUOf reads a GPU's name as GPUName writes it (one spelling per GPU:
// h0:gpu01 is not one) into its host and index; ok is false for any other
// name.
func GPUOf(name string) (host string, g int, ok bool) {
	host, n, ok := strings.Cut(name, ":gpu")
	if !ok {
		return "", 0, false
	}
	g, err := strconv.Atoi(n)
	if err != nil || g < 0 || strconv.Itoa(g) != n {
		return "", 0, false
	}
	return host, g, true
}

// Places are every NIC and GPU of the topology's hosts, by name, hosts in
// order.
func (t *Topology) Places() []string {
	var out []string
	for _, h := range t.Hosts() {
		for p := range h.Links {
			out = append(out, NICName(h.Name, p))
		}
		for g := range h.GPUs {
			out = append(out, GPUName(h.Name, g))
		}
	}
	return out
}
