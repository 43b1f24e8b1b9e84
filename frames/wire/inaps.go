package wire

import "encoding/binary"

// The INA-PS frame: in-network aggregation with a parameter server as
// ATP builds it (in-ATP/ATP, common/packet.h, struct agghdr, packed,
// network byte order) and as ESA extends it: Ethernet with EtherType
// 0x0700, an IPv4 header with no UDP after it, then this header of 274
// bytes, 308 bytes in all (P4ML_PACKET_SIZE = 34 + 26 + 248).
//
//	offset  size  field
//	     0     4  bitmap      1 << worker on send; ORed in the switch
//	     4     1  fan-in      workers of the job (P4: agtr_time)
//	     5     1  flags       INAPSFlag* bits
//	     6     2  job ID      (appID; 0 is no job)
//	     8     2  sequence    from 1 per tensor
//	    10     2  aggregator  index of the switch aggregator
//	    12     2  agtr2       ATP: agtr + 20000, the second register pass;
//	                          ESA: byte 12 priority, byte 13 INAPSLevel* bits
//	    14   248  vector      62 × int32 (raw floats on an overflow packet)
//	   262     8  key         the tensor's key
//	   270     4  length      the tensor's length (a collision ACK: the new aggregator)
//
// inaemu's aggregator holds all 62 values in one slot, so bytes 12-13
// carry ESA's priority and level instead of ATP's second index (a frame
// of the same size, as ESA states its header is ATP's plus a priority).
type INAPS []byte

const (
	// EtherTypeINAPS selects ATP's parsing in its P4 program.
	EtherTypeINAPS = 0x0700
	// INAPSLen is the header after the IPv4 header; INAPSFrameLen the
	// whole frame (Ethernet 14, IPv4 20, header 274).
	INAPSLen      = 274
	INAPSFrameLen = 14 + 20 + INAPSLen
	// INAPSValues is the number of int32 values a frame carries
	// (MAX_ENTRIES_PER_PACKET).
	INAPSValues = 62
)

// The flag byte, most significant bit first: overflow, PS index (2
// bits), data index, ECN, resend, switch collision, ACK (ATP's
// p4src/includes/headers.p4).
const (
	INAPSFlagACK         = 0x01
	INAPSFlagCollision   = 0x02
	INAPSFlagResend      = 0x04
	INAPSFlagECN         = 0x08
	INAPSFlagDataIndex   = 0x10
	INAPSFlagPSIndex     = 0x60 // two bits
	INAPSFlagOverflow    = 0x80
	INAPSFlagsReminder   = INAPSFlagResend | INAPSFlagCollision // without ACK: inaemu's reminder
	inapsPSIndexShift    = 5
	INAPSLevelSecond     = 0x01 // ESA: aggregated at the second-level switch
	INAPSLevelBitmap1    = 0x02 // ESA: bitmap1 (in the key's upper bits) is valid
	INAPSLevelShadowSet  = 0x04 // SwitchML-style: the shadow set
	inapsOffBitmap       = 0
	inapsOffFanIn        = 4
	inapsOffFlags        = 5
	inapsOffJob          = 6
	inapsOffSeq          = 8
	inapsOffAggregator   = 10
	inapsOffAgtr2        = 12
	inapsOffVector       = 14
	inapsOffKey          = inapsOffVector + 4*INAPSValues
	inapsOffTensorLength = inapsOffKey + 8
)

func (h INAPS) Bitmap() uint32     { return binary.BigEndian.Uint32(h[inapsOffBitmap:]) }
func (h INAPS) FanIn() uint8       { return h[inapsOffFanIn] }
func (h INAPS) Flags() uint8       { return h[inapsOffFlags] }
func (h INAPS) Job() uint16        { return binary.BigEndian.Uint16(h[inapsOffJob:]) }
func (h INAPS) Seq() uint16        { return binary.BigEndian.Uint16(h[inapsOffSeq:]) }
func (h INAPS) Aggregator() uint16 { return binary.BigEndian.Uint16(h[inapsOffAggregator:]) }
func (h INAPS) Agtr2() uint16      { return binary.BigEndian.Uint16(h[inapsOffAgtr2:]) }
func (h INAPS) Priority() uint8    { return h[inapsOffAgtr2] }
func (h INAPS) Level() uint8       { return h[inapsOffAgtr2+1] }
func (h INAPS) Key() uint64        { return binary.BigEndian.Uint64(h[inapsOffKey:]) }
func (h INAPS) TensorLength() uint32 {
	return binary.BigEndian.Uint32(h[inapsOffTensorLength:])
}

// PSIndex is the flag byte's two-bit parameter-server index.
func (h INAPS) PSIndex() uint8 { return h.Flags() & INAPSFlagPSIndex >> inapsPSIndexShift }

// Value is the i-th of the 62 values (an int32; a raw float's bits on an
// overflow packet).
func (h INAPS) Value(i int) int32 {
	return int32(binary.BigEndian.Uint32(h[inapsOffVector+4*i:]))
}

// Vector is the 248 bytes of values.
func (h INAPS) Vector() []byte { return h[inapsOffVector:inapsOffKey] }

func (h INAPS) SetBitmap(v uint32)     { binary.BigEndian.PutUint32(h[inapsOffBitmap:], v) }
func (h INAPS) SetFanIn(v uint8)       { h[inapsOffFanIn] = v }
func (h INAPS) SetFlags(v uint8)       { h[inapsOffFlags] = v }
func (h INAPS) SetJob(v uint16)        { binary.BigEndian.PutUint16(h[inapsOffJob:], v) }
func (h INAPS) SetSeq(v uint16)        { binary.BigEndian.PutUint16(h[inapsOffSeq:], v) }
func (h INAPS) SetAggregator(v uint16) { binary.BigEndian.PutUint16(h[inapsOffAggregator:], v) }
func (h INAPS) SetAgtr2(v uint16)      { binary.BigEndian.PutUint16(h[inapsOffAgtr2:], v) }
func (h INAPS) SetPriority(v uint8)    { h[inapsOffAgtr2] = v }
func (h INAPS) SetLevel(v uint8)       { h[inapsOffAgtr2+1] = v }
func (h INAPS) SetKey(v uint64)        { binary.BigEndian.PutUint64(h[inapsOffKey:], v) }
func (h INAPS) SetTensorLength(v uint32) {
	binary.BigEndian.PutUint32(h[inapsOffTensorLength:], v)
}
func (h INAPS) SetValue(i int, v int32) {
	binary.BigEndian.PutUint32(h[inapsOffVector+4*i:], uint32(v))
}

// IsReminder reports whether the header is a reminder: the flags
// INAPSFlagsReminder exactly (ESA's "all fields, except the job ID and
// sequence number, are 0"; inaemu keeps the aggregator index too).
func (h INAPS) IsReminder() bool { return h.Flags() == INAPSFlagsReminder }
