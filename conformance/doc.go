// Package conformance holds the property suites behind `inaemu
// conformance` and the capture checker behind `inaemu check`.
//
// The suites (gopter generators, one case per (seed, index)) run generated
// jobs and fault schedules through the emulator and check three things:
// aggregation is bit-exact under either release rule (AggregationSuite),
// go-back-N delivers and follows its rules on one RC connection
// (GBNSuite), and every ICRC is right (ICRCSuite). A failing case is
// shrunk and written as a scenario file plus its capture. A transport
// error passes the aggregation property only when the run's fault log
// proves the retries ran out (see budgetExceeded).
//
// The checker (Check, CheckFile) reads any pcap or pcapng and judges
// ICRCs, the go-back-N rules per connection and vantage point, and
// NetReduce result sums; it depends on wire formats only, so it judges
// captures from any device.
package conformance
