package capcheck

import (
	"fmt"
	"strings"
)

// A Rule is one of the checker's rules. Rules is the one list of them:
// docs/check.md's rule list, the JUnit report's testcases (one per rule)
// and the text report's per-family summary lines come from it, and each
// family's code is its own file, rules_FAMILY.go.
type Rule struct {
	// Name is what a violation of the rule carries (Violation.Rule).
	Name string
	// Family is the rule's family: the file that implements it
	// (rules_icrc.go, rules_psn.go, ...) and the summary line, if any,
	// that the text report prints for it.
	Family string
	// Doc says in one line what the rule reports.
	Doc string
	// Counter is the report's count (its JSON name) of what the rule
	// judged, or the per-connection one under streams[]: how much
	// evidence a clean verdict rests on.
	Counter string
}

// Rules lists every rule, in the order the JUnit report gives them.
var Rules = []Rule{
	{RuleICRC, famICRC, "a RoCE frame whose ICRC is wrong", "roce_frames"},
	{RulePacked, famPacked, "a SEND or WRITE marked as carrying a compressed payload (DSCP 10, INCEPTIONN's ToS 0x28) whose payload does not unpack", "compressed"},
	{RulePSNOrder, famPSN, "a requester sends a PSN go-back-N does not allow: a skip, a retransmission after a NAK that does not start at the NAK's PSN, a resend of what was acknowledged", "streams[].data_packets"},
	{RuleNAKPSN, famPSN, "a NAK that does not carry the first missing PSN", "streams[].naks"},
	{RuleExtraNAK, famPSN, "a second NAK for a gap not yet repaired", "streams[].naks"},
	{RuleACKRegress, famPSN, "an ACK behind an earlier ACK of the same connection", "streams[].acks"},
	{RuleReadPSN, famReadAtomic, "a READ response in the range of no READ request that passed, out of its place in its READ, or answering a PSN more often than READ requests covering it passed; a re-issued READ request whose RETH is not the rest of the READ", "read_requests"},
	{RuleAtomicPSN, famReadAtomic, "an Atomic Acknowledge whose PSN no compare-and-swap or fetch-and-add carried, or more of them than such requests", "atomic_requests"},
	{RuleAtomicReplay, famReadAtomic, "a duplicate atomic answered with another original value (it must come from the responder's replay cache, not a second execution)", "atomic_requests"},
	{RuleAggSum, famAgg, "a NetReduce result that is not the rank-order sum of the contributions that reached the switch (tree order across racks)", "agg_checked"},
	{RuleResultLost, famOwed, "a NetReduce result the switch owed and never sent: every rank's contribution of the packet reached it, other ranks' results left, this rank's did not before its sender resent the packet (judged once a later result to the same receiver shows the switch handled the resend; on faultwire's capture of a device)", "owed_judged"},
	{RuleINAPSSum, famINAPS, "an INA-PS result (ACK) that is not the wrapping int32 sum of every worker's gradient, or whose bitmap is not the job's full mask; a worker's two copies of one gradient that differ", "inaps_results"},
	{RuleINAPSPartial, famINAPS, "an INA-PS partial (Collision, or a reminder's return) that is not the wrapping int32 sum of the gradients its bitmap names", "inaps_partials"},
	{RulePFCFormat, famPFC, "a MAC Control frame that is no well-formed PAUSE or PFC frame: tagged, not 64 bytes (60 without FCS), a PFC frame not to 01:80:C2:00:00:01 or with the enable vector's reserved octet set, another opcode to that address", "pfc_frames"},
	{RulePFCPausedSend, famPFC, "a frame of a paused priority whose transmission started after the pause reached its sender (allowing the frame on the line and --link-delay) and before it expired or was resumed", "pfc_pauses"},
	{RulePFCDeadlock, famPFC, "a cycle of directions between switches, each paused for the same priority without a break for --pfc-deadlock or longer at the end of the capture", "pfc_pauses"},
	{RuleCNPMissing, famCNP, "a CE-marked data packet delivered to a receiver whose NP is on, with no CNP from it for the connection within the CNP interval plus the in-flight tolerance", "ce_judged"},
	{RuleCNPRate, famCNP, "two CNPs from one receiver for one QP closer than the CNP interval (less --cnp-tolerance)", "cnps_judged"},
}

// RuleNames are the names of Rules, in order.
func RuleNames() []string {
	names := make([]string, len(Rules))
	for i, r := range Rules {
		names[i] = r.Name
	}
	return names
}

// familyOf is the family of the rule named rule ("" for none).
func familyOf(rule string) string {
	for _, r := range Rules {
		if r.Name == rule {
			return r.Family
		}
	}
	return ""
}

// RuleCounts is the number of violations per rule (rules with none are
// left out).
func (r *Report) RuleCounts() map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Rule]++
	}
	return m
}

// The rule families, each a file of its own.
const (
	famICRC       = "icrc"       // rules_icrc.go
	famPacked     = "packed"     // rules_packed.go
	famPSN        = "psn"        // rules_psn.go
	famReadAtomic = "readatomic" // rules_readatomic.go
	famAgg        = "agg"        // rules_agg.go
	famOwed       = "owed"       // rules_owed.go
	famINAPS      = "inaps"      // rules_inaps.go
	famPFC        = "pfc"        // rules_pfc.go
	famCNP        = "cnp"        // rules_cnp.go
)

// A ruleFamily's summary writes its lines of the text report (none when
// the report has nothing to say of it); label is what the line starts
// with.
type ruleFamily struct {
	name, label string
	summary     func(r *Report) string
}

// families are the rule families with a summary line, by name.
var families = map[string]ruleFamily{
	famICRC:       {famICRC, "icrc", icrcSummary},
	famPacked:     {famPacked, "compressed", packedSummary},
	famReadAtomic: {famReadAtomic, "read/atomic", readAtomicSummary},
	famAgg:        {famAgg, "aggregation", aggSummary},
	famOwed:       {famOwed, "owed", owedSummary},
	famINAPS:      {famINAPS, "ina-ps", inapsSummary},
	famPFC:        {famPFC, "pfc", pfcSummary},
	famCNP:        {famCNP, "cnp", cnpSummary},
}

// writeFamily writes family's summary line, if it has one to say.
func writeFamily(b *strings.Builder, r *Report, family string) {
	f := families[family]
	if s := f.summary(r); s != "" {
		fmt.Fprintf(b, "  %-12s %s\n", f.label, s)
	}
}
