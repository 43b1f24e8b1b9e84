package inaps

import (
	"fmt"
	"strings"
)

// Policy is how the switch shares its aggregators among jobs.
type Policy uint8

const (
	// Static is SwitchML-style: each job a region of its own for its whole
	// life, split into two shadow sets; no PS.
	Static Policy = iota
	// FCFS is ATP-style: one aggregator per task, first come first served;
	// a colliding packet goes raw to the PS; completion goes to the PS,
	// whose ACK releases the aggregator.
	FCFS
	// ESA preempts by priority: a higher-priority packet evicts the
	// holder's partial to its PS; a failed preemption halves the holder's
	// priority; completion is multicast straight to the workers.
	ESA
	// Straw1 is ESA that always preempts (priority ignored).
	Straw1
	// Straw2 is ESA that preempts with probability ½ (a seeded coin).
	Straw2
)

var policyNames = [...]string{"static", "fcfs", "esa", "straw1", "straw2"}

var policyDocs = [...]string{
	"SwitchML-style: equal regions per job, two shadow sets, no PS",
	"ATP-style: first come first served, collisions to the PS, release on the PS's ACK",
	"ESA: preemption by priority, halving on a failed preemption, direct multicast",
	"ESA's straw man: every collision preempts",
	"ESA's straw man: a collision preempts with probability 1/2",
}

func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("policy(%d)", p)
}

// Preemptive reports whether the policy is ESA or a straw man: a PS that
// takes partials, reminders, retransmissions over the reliable channel.
func (p Policy) Preemptive() bool { return p >= ESA }

// HasPS reports whether jobs under the policy have a parameter server.
func (p Policy) HasPS() bool { return p != Static }

// ParsePolicy reads a policy's name.
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if s == n {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("policy %q: want %s", s, strings.Join(policyNames[:], ", "))
}

// PolicyNames are the policies' names, in the order above.
func PolicyNames() []string { return append([]string(nil), policyNames[:]...) }

// PolicyHelp is one line per policy, for --help.
func PolicyHelp() string {
	var b strings.Builder
	for i, n := range policyNames {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", n, policyDocs[i])
	}
	return b.String()
}
