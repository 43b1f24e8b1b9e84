package frames

import (
	"encoding/binary"
	"fmt"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// PFC is the body of an IEEE 802.1Qbb Priority-based Flow Control frame, a
// MAC Control frame (EtherType 0x8808) with opcode 0x0101, as IEEE 802.3
// Annex 31D defines it:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Opcode (0x0101)           |  Reserved (0)  |e7 e6 ... e1 e0|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Time[0]               |         Time[1]               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Time[2]               |         Time[3]               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Time[4]               |         Time[5]               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Time[6]               |         Time[7]               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           zero padding to the minimum frame size ...          |
//
// The priority-enable vector's bit i (e_i) says Time[i] is valid for
// priority i; its high octet is reserved and zero. Each Time is a pause in
// quanta of 512 bit times at the link's rate (IEEE 802.3 Clause 31B's
// pause_quanta); 0 releases the priority at once (XON). The frame goes to
// the MAC Control multicast address 01-80-C2-00-00-01 from the sending
// port's own MAC, and is padded to the minimum frame size: 64 bytes with
// the FCS, PFCFrameLen as captured without it. Wireshark's MAC Control
// dissector (packet-maccontrol.c) shows it as "Class Based Flow Control",
// macc.cbfc.enbv and macc.cbfc.pause_time.c0..c7.
type PFC struct {
	layers.BaseLayer
	// Enable is the priority-enable vector as on the wire (bits 8..15 are
	// reserved and zero in a well-formed frame).
	Enable uint16
	Quanta [8]uint16
}

// PFC frame constants (IEEE 802.3 Annex 31A, 31D; 802.1Qbb).
const (
	EtherTypeMACControl layers.EthernetType = 0x8808
	OpcodePFC                               = 0x0101
	// PFCLen is the PFC body: opcode, vector and eight times.
	PFCLen = 2 + 2 + 8*2
	// PFCFrameLen is a PFC frame as captured, without the FCS: the
	// minimum Ethernet frame (64 bytes) less its 4-byte FCS.
	PFCFrameLen = 60
	// PauseQuantumBits is one pause quantum: 512 bit times.
	PauseQuantumBits = 512
)

// PFCDst is the MAC Control frames' destination, the reserved multicast
// address 01-80-C2-00-00-01 no bridge forwards.
var PFCDst = [6]byte{0x01, 0x80, 0xC2, 0x00, 0x00, 0x01}

// LayerTypePFC is the PFC body's layer type.
var LayerTypePFC = gopacket.RegisterLayerType(1804, gopacket.LayerTypeMetadata{Name: "PFC", Decoder: gopacket.DecodeFunc(decodePFC)})

func init() {
	layers.EthernetTypeMetadata[EtherTypeMACControl] = layers.EnumMetadata{
		DecodeWith: gopacket.DecodeFunc(decodePFC), Name: "MACControl", LayerType: LayerTypePFC}
}

func (x *PFC) LayerType() gopacket.LayerType     { return LayerTypePFC }
func (x *PFC) CanDecode() gopacket.LayerClass    { return LayerTypePFC }
func (x *PFC) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes reads the body after the Ethernet header; the padding
// is its payload. A MAC Control frame of another opcode (802.3x PAUSE,
// EPON's MPCP) is an error: this layer is PFC's only.
func (x *PFC) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < PFCLen {
		df.SetTruncated()
		return fmt.Errorf("PFC: %d bytes, need %d", len(data), PFCLen)
	}
	if op := binary.BigEndian.Uint16(data); op != OpcodePFC {
		return fmt.Errorf("PFC: MAC Control opcode %#04x, want %#04x", op, OpcodePFC)
	}
	x.Enable = binary.BigEndian.Uint16(data[2:])
	for i := range x.Quanta {
		x.Quanta[i] = binary.BigEndian.Uint16(data[4+2*i:])
	}
	x.BaseLayer = layers.BaseLayer{Contents: data[:PFCLen], Payload: data[PFCLen:]}
	return nil
}

// SerializeTo writes the opcode, vector and times (no padding: a Payload
// layer or the frame's builder adds it).
func (x *PFC) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	d, err := buf.PrependBytes(PFCLen)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint16(d, OpcodePFC)
	binary.BigEndian.PutUint16(d[2:], x.Enable)
	for i, q := range x.Quanta {
		binary.BigEndian.PutUint16(d[4+2*i:], q)
	}
	return nil
}

func decodePFC(data []byte, p gopacket.PacketBuilder) error {
	x := &PFC{}
	if err := x.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(x)
	return p.NextDecoder(x.NextLayerType())
}

// BuildPFC writes a PFC frame from src into buf (at least PFCFrameLen
// bytes) and returns its length, PFCFrameLen: priority i is named when
// enable has bit i set, with pause quanta[i]; the times of the priorities
// not named are written as 0.
func BuildPFC(buf []byte, src [6]byte, enable uint8, quanta [8]uint16) int {
	b := buf[:PFCFrameLen]
	copy(b[0:6], PFCDst[:])
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:], uint16(EtherTypeMACControl))
	binary.BigEndian.PutUint16(b[14:], OpcodePFC)
	binary.BigEndian.PutUint16(b[16:], uint16(enable))
	for i := range quanta {
		q := quanta[i]
		if enable&(1<<i) == 0 {
			q = 0
		}
		binary.BigEndian.PutUint16(b[18+2*i:], q)
	}
	clear(b[14+PFCLen:])
	return PFCFrameLen
}

// AppendPFC appends a PFC frame (BuildPFC's) to b.
func AppendPFC(b []byte, src [6]byte, enable uint8, quanta [8]uint16) []byte {
	n := len(b)
	b = append(b, make([]byte, PFCFrameLen)...)
	BuildPFC(b[n:], src, enable, quanta)
	return b
}

// IsMACControl reports whether frame's EtherType is MAC Control's (0x8808):
// a frame its receiving MAC consumes rather than passes up.
func IsMACControl(frame []byte) bool {
	return len(frame) >= 14 && frame[12] == 0x88 && frame[13] == 0x08
}

// ParsePFC reads a PFC frame without allocating: its priority-enable
// vector and the eight times (a priority not enabled has its time as
// written, normally 0). ok is false for anything else: another
// EtherType or MAC Control opcode, a length other than the minimum
// frame's (60 bytes as captured, 64 with the FCS: Annex 31A's MAC Control
// frames are exactly minFrameSize), or a vector whose reserved high octet
// is not zero. The destination address is not checked (802.3 31B.3.1: a
// receiving MAC also acts on its own unicast address).
func ParsePFC(frame []byte) (enable uint8, quanta [8]uint16, ok bool) {
	if (len(frame) != PFCFrameLen && len(frame) != PFCFrameLen+4) || !IsMACControl(frame) ||
		binary.BigEndian.Uint16(frame[14:]) != OpcodePFC || frame[16] != 0 {
		return 0, quanta, false
	}
	for i := range quanta {
		quanta[i] = binary.BigEndian.Uint16(frame[18+2*i:])
	}
	return frame[17], quanta, true
}
