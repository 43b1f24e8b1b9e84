// Package conformance holds the property suites behind `inaemu
// conformance`.
//
// The suites (gopter generators, one case per (seed, index)) run generated
// jobs and fault schedules through the emulator, or through a device under
// test on TAPs, and check six things: aggregation is bit-exact under
// either release rule (AggregationSuite), go-back-N delivers and follows
// its rules on one RC connection (GBNSuite), every ICRC is right
// (ICRCSuite), tenants sharing a switch stay isolated (tenants), a
// NetReduce job across racks is exact (multirack), and the schemes over
// multi-GPU machines are exact (schemes). A failing case is
// shrunk and written as a scenario file plus its capture. A transport
// error passes the aggregation property only when the run's fault log
// proves the retries ran out (see budgetExceeded).
//
// The capture checker behind `inaemu check` is package capcheck, which
// depends on wire formats only; its tests against fresh emulator
// captures live here, with the emulator.
package conformance
