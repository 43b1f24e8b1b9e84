// Code in this file re-exports emu/job and emu/collective: the facade
// users and tests call (emu.Run, emu.Config, emu.NetReduce) while the
// runner and the algorithms live in packages of their own. Aliases, not
// copies: emu.Config is job.Config.

package emu

import (
	"github.com/inaemu/inaemu/emu/collective"
	"github.com/inaemu/inaemu/emu/job"
)

// The runner (emu/job).
type (
	Algorithm         = job.Algorithm
	Bcast             = job.Bcast
	CaptureError      = job.CaptureError
	Collective        = job.Collective
	CompressionReport = job.CompressionReport
	Config            = job.Config
	ConfigError       = job.ConfigError
	Connector         = job.Connector
	Endpoint          = job.Endpoint
	Group             = job.Group
	HopReport         = job.HopReport
	Interrupted       = job.Interrupted
	Job               = job.Job
	JobConfig         = job.JobConfig
	JobError          = job.JobError
	JobResult         = job.JobResult
	JobRing           = job.JobRing
	JobSpec           = job.JobSpec
	MemoryEstimate    = job.MemoryEstimate
	Mismatch          = job.Mismatch
	Mode              = job.Mode
	QPFailure         = job.QPFailure
	Reporter          = job.Reporter
	Result            = job.Result
	RingPSNs          = job.RingPSNs
	Session           = job.Session
	Source            = job.Source
	StageIO           = job.StageIO
	TreeSwitch        = job.TreeSwitch
	Verb              = job.Verb
	Worker            = job.Worker
)

const (
	BcastTree       = job.BcastTree
	BcastUnicast    = job.BcastUnicast
	BcastWorkerTree = job.BcastWorkerTree
	DefaultMode     = job.DefaultMode
	FrameBytes      = job.FrameBytes
	PollEvents      = job.PollEvents
	RecvBaseVA      = job.RecvBaseVA
	RecvQPN         = job.RecvQPN
	SendQPN         = job.SendQPN
	VerbCmpSwap     = job.VerbCmpSwap
	VerbFetchAdd    = job.VerbFetchAdd
	VerbRead        = job.VerbRead
	VerbWrite       = job.VerbWrite
	WRBytes         = job.WRBytes
)

var (
	AlgorithmNames    = job.AlgorithmNames
	AvailableMemory   = job.AvailableMemory
	CeilDiv           = job.CeilDiv
	DefaultConfig     = job.DefaultConfig
	EstimateMemory    = job.EstimateMemory
	EstimateRunMemory = job.EstimateRunMemory
	GPURank           = job.GPURank
	HostMAC           = job.HostMAC
	IntraHop          = job.IntraHop
	JobSeed           = job.JobSeed
	Lookup            = job.Lookup
	MarkPath          = job.MarkPath
	MaxAbsDiff        = job.MaxAbsDiff
	NewSession        = job.NewSession
	PacketTrip        = job.PacketTrip
	ParseBcast        = job.ParseBcast
	ParseMode         = job.ParseMode
	ParsePattern      = job.ParsePattern
	ParseVerb         = job.ParseVerb
	PerPacketBytes    = job.PerPacketBytes
	Register          = job.Register
	Run               = job.Run
	ServeSwitch       = job.ServeSwitch
)

// The collective algorithms (emu/collective), each registered as a job mode.
const (
	FR        = collective.FR
	NetReduce = collective.NetReduce
	PN        = collective.PN
	PR        = collective.PR
	Ring      = collective.Ring
	TA        = collective.TA
	Verbs     = collective.Verbs
	WA        = collective.WA
)

var (
	IsGPUScheme       = collective.IsGPUScheme
	NetReduceRing     = collective.NetReduceRing
	NetReduceMessages = collective.NetReduceMessages
)
