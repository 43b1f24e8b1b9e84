// Package emu runs collective jobs on an emulated fabric: Config describes
// a run (a topology, one or more jobs placed on its host NICs, faults, a
// capture), Run builds the fabric (package fabric), gives every rank its
// QPs and buffers, runs the jobs' algorithms on the virtual clock and
// checks each rank's result bit for bit against a reference computed
// outside the network. Algorithms are an open set registered by name
// (netreduce, ring, wa, verbs; the schemes over multi-GPU machines fr, pn,
// pr and ta run their stages as jobs of these). Sweep runs a job over a grid of settings;
// EstimateMemory says what a job will hold. On the TAP backend (package
// emu/live, given as Config.Devices; live.ServeSwitch runs the switch) the
// same jobs run on real interfaces in wall-clock time; emu itself imports
// no device package.
package emu
