// Package conformance will hold the property suites (aggregation, go-back-N,
// checksum) and the capture checker behind `inaemu conformance` and
// `inaemu check` (issue 5). Nothing is implemented here yet.
package conformance
