// Package endpoint is the hosts of the INA-PS transport: workers that
// push gradient fragments to the switch under a window and get results
// back, and the parameter server that completes what the switch could
// not (diverted gradients, evicted partials, lost packets). Each speaks
// INA-PS frames (ATP's layout, package frames/wire) and, between a worker
// and its PS, a reliable channel over UDP. Endpoints run on a clock and
// are pulled for frames by their NIC (nic.RawSource); they know nothing
// of links or switches.
package endpoint
