// Code in this file re-exports emu/job and emu/collective: the facade
// users and tests call (emu.Run, emu.Config, emu.NetReduce) while the
// runner and the algorithms live in packages of their own. Aliases, not
// copies: emu.Config is job.Config.

package emu

import (
	// The built-in switch programs beside NetReduce's (which its
	// collective links in): a program registers itself when imported.
	_ "github.com/inaemu/inaemu/emu/ars"

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
	Flow              = job.Flow
	FlowResult        = job.FlowResult
	Group             = job.Group
	Hier              = job.Hier
	HierReport        = job.HierReport
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
	Traffic           = job.Traffic
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

// The runner's entry points (emu/job).
var (
	// Run runs cfg's jobs to their end and checks every rank's result.
	Run = job.Run
	// DefaultConfig is one NetReduce job of 8 workers on a 10G star.
	DefaultConfig = job.DefaultConfig
	// NewSession builds a run without starting it (tests drive its loop).
	NewSession = job.NewSession
	// EstimateMemory and EstimateRunMemory say what a job, and a run of
	// several, will hold at their peak; AvailableMemory what there is.
	EstimateMemory    = job.EstimateMemory
	EstimateRunMemory = job.EstimateRunMemory
	AvailableMemory   = job.AvailableMemory
	// The flag vocabulary: modes (AlgorithmNames lists the registered
	// ones), broadcasts, verbs, gradient patterns.
	AlgorithmNames = job.AlgorithmNames
	ModeHelp       = job.ModeHelp
	ParseMode      = job.ParseMode
	ParseBcast     = job.ParseBcast
	ParseVerb      = job.ParseVerb
	ParsePattern   = job.ParsePattern
	ParseCC        = job.ParseCC
	ParsePFC       = job.ParsePFC
	// HostMAC is rank r's NIC MAC; PerPacketBytes a transport's headers
	// per packet.
	HostMAC        = job.HostMAC
	PerPacketBytes = job.PerPacketBytes
)

// The collective algorithms (emu/collective), each registered as a job
// mode.
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

// What the NetReduce and scheme collectives tell their callers.
var (
	IsGPUScheme       = collective.IsGPUScheme
	NetReduceRing     = collective.NetReduceRing
	NetReduceMessages = collective.NetReduceMessages
)
