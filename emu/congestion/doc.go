// Package congestion holds the congestion experiments of
// docs/congestion.md (issue 36): each file builds the emu.Config of one
// published claim at its anchor's parameters (PFC's lossless incast,
// head-of-line blocking, PFC deadlock, DCQCN's convergence, ...), runs
// it, and returns a result with json tags; its test asserts the claim
// against a value computed independently from the paper or standard.
//
// Every experiment also has an `inaemu run` command (flags or a scenario
// under docs/congestion/) that reproduces it; docs/congestion.md gives
// the commands beside the measured and the published numbers. Runs are
// sized so the package's tests stay quick; the full sweeps are opt-in
// (INAEMU_SCALE=1).
package congestion
