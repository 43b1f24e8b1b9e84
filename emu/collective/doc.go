// Package collective holds the collective algorithms, one file each, each
// registering itself with the runner (package emu/job) as a job mode:
// netreduce (the hosts' ring of RDMA WRITEs through an aggregating switch
// program, whichever --switch-program names), ring (Ring-AllReduce), wa
// (worker-aggregator), verbs (perftest's shape: WRITE, READ, atomics) and
// the schemes over multi-GPU machines fr, pn, pr and ta (scheme.go, with
// their intra-machine stages in intrastage.go), which run their
// inter-machine stages as jobs of the others.
//
// A new algorithm is one more file here (or a package of its own): a
// job.Collective and a job.Register call in its init.
package collective
