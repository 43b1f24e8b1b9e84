// Package job is the runner: it places a run's jobs on the fabric (ranks
// on host NICs or GPUs, QPNs, rkeys and receive addresses per job), gives
// every rank its QPs and connects them, drives the event loop, polls the
// completion queues and collects each job's result and counters.
//
// It never names a mode. A collective algorithm is an Algorithm
// registered with Register (from its own file, package collective, or any
// package that imports this one): its New makes the job's Collective
// (Start, OnCompletion, Check), and its descriptor answers everything the
// runner would otherwise ask by mode — how ranks are placed (ExtraRank,
// OnGPUs, NeedsGPUs), whether it plans sub-jobs (Plan, Group,
// StageIO), its own validation (Validate, ValidateJob, ValidateRun), its
// memory (Memory), what a switch on real interfaces must hold for it
// (ServeSwitch). Optional interfaces add the rest: Connector (its own QPs),
// Reporter (figures of its own), HopMeter and ErrorMeter (compression).
//
// Devices, the live backend (package emu/live), is an interface: the
// runner imports no device package.
package job
