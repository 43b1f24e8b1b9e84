package switching

// The contract between the switch's buffer (its memory manager: the
// admission and PFC thresholds of buffer.go) and the ports' MACs (the
// link directions of emu/fabric, which send and honour the pauses). Its
// implementations are buffer.go's (BufferConfig, the thresholds) and
// fabric's link directions (PauseEgress).

// PauseEgress is a port's egress that can send an 802.1Qbb PFC frame
// ahead of its queue (a MAC Control frame is never queued behind data
// nor paused): enable has bit i set for each priority i the frame
// names, quanta[i] is priority i's pause time in units of 512 bit times
// (0: resume at once). A link direction is one; a device is not (a
// switch on devices sends no pauses).
type PauseEgress interface {
	SendPause(enable uint8, quanta [8]uint16)
}

// BufferConfig is the switch's shared buffer and the thresholds its
// memory manager applies (SetBuffer). The zero value is today's
// accounting only: nothing admitted or paused on the counts.
type BufferConfig struct {
	// Bytes is the shared buffer's size (0: DefaultBufferBytes).
	Bytes int64
	// Lossless has bit i set for each priority PFC protects: an ingress
	// (port, priority) over its XOFF threshold pauses the upstream
	// transmitter for that priority; under XON it resumes it. Frames of
	// the other priorities are lossy: admitted against the egress
	// threshold, dropped when it is exceeded.
	Lossless uint8
	// Enforce turns admission on for lossy priorities too (a buffer that
	// drops when full) even with Lossless 0.
	Enforce bool
	// XOFF, if positive, is a static XOFF threshold in bytes per ingress
	// (port, priority); 0 is the dynamic threshold Alpha × (free shared
	// buffer), as commodity switches configure it.
	XOFF int64
	// Alpha is the dynamic threshold's factor (0: the default).
	Alpha float64
	// XONDelta is how far under XOFF an ingress queue must drain before it
	// is resumed (0: the default).
	XONDelta int64
	// Headroom is what each lossless ingress (port, priority) may hold
	// beyond XOFF, for the frames in flight while the pause takes effect
	// (0: computed per port from its link).
	Headroom int64
	// EgressAlpha is the lossy egress queues' dynamic threshold factor
	// (0: the default).
	EgressAlpha float64
}
