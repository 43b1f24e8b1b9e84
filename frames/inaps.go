package frames

import (
	"fmt"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/inaemu/inaemu/frames/wire"
)

// INAPS is the header of an INA-PS frame: in-network aggregation with a
// parameter server, ATP's layout with ESA's priority (see wire.INAPS for
// the byte offsets and the flag bits). The frame is Ethernet (EtherType
// 0x0700), an IPv4 header with no UDP, then this header; 308 bytes.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                            Bitmap                             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     FanIn     |O| PS|D|E|R|C|A|             Job ID            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Sequence           |           Aggregator          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Priority    |     Level     |  Value 0 ...                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	|            ... 62 × int32 values (248 bytes) ...              |
//	+                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                               |     Key (8 bytes) ...         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	|                                                               |
//	+                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                               |  Tensor length (4 bytes) ...  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|              ...              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Flags: O overflow, PS the parameter-server index, D data index, E ECN,
// R resend, C switch collision, A ACK. Priority and Level are ATP's
// second aggregator index (agtr2) in ATP's own frames.
//
// Sources: ATP (NSDI '21) and its public code (github.com/in-ATP/ATP,
// common/packet.h struct agghdr, p4src/includes/headers.p4); ESA's
// priority byte: H. Wang, Y. Qin, C. Lao, Y. Le, W. Wu, K. Chen,
// "Efficient Data-Plane Memory Scheduling for In-Network Aggregation",
// §5.1.
type INAPS struct {
	layers.BaseLayer
	Bitmap       uint32
	FanIn        uint8
	Flags        uint8
	Job          uint16
	Seq          uint16
	Aggregator   uint16
	Priority     uint8 // ATP's agtr2 high byte
	Level        uint8 // ATP's agtr2 low byte
	Values       [wire.INAPSValues]int32
	Key          uint64
	TensorLength uint32
}

// EtherTypeINAPS is the INA-PS frame's EtherType (ATP's).
const EtherTypeINAPS layers.EthernetType = wire.EtherTypeINAPS

// LayerTypeINAPS is the INA-PS header's layer type.
var LayerTypeINAPS = gopacket.RegisterLayerType(1803, gopacket.LayerTypeMetadata{Name: "INAPS", Decoder: gopacket.DecodeFunc(decodeINAPS)})

func init() {
	layers.EthernetTypeMetadata[EtherTypeINAPS] = layers.EnumMetadata{
		DecodeWith: gopacket.DecodeFunc(decodeINAPSFrame), Name: "INA-PS", LayerType: layers.LayerTypeIPv4}
}

func (x *INAPS) LayerType() gopacket.LayerType     { return LayerTypeINAPS }
func (x *INAPS) CanDecode() gopacket.LayerClass    { return LayerTypeINAPS }
func (x *INAPS) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }
func (x *INAPS) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < wire.INAPSLen {
		df.SetTruncated()
		return fmt.Errorf("INAPS: %d bytes, need %d", len(data), wire.INAPSLen)
	}
	h := wire.INAPS(data)
	x.Bitmap, x.FanIn, x.Flags, x.Job, x.Seq, x.Aggregator = h.Bitmap(), h.FanIn(), h.Flags(), h.Job(), h.Seq(), h.Aggregator()
	x.Priority, x.Level, x.Key, x.TensorLength = h.Priority(), h.Level(), h.Key(), h.TensorLength()
	for i := range x.Values {
		x.Values[i] = h.Value(i)
	}
	x.BaseLayer = layers.BaseLayer{Contents: data[:wire.INAPSLen], Payload: data[wire.INAPSLen:]}
	return nil
}

func (x *INAPS) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	d, err := buf.PrependBytes(wire.INAPSLen)
	if err != nil {
		return err
	}
	h := wire.INAPS(d)
	h.SetBitmap(x.Bitmap)
	h.SetFanIn(x.FanIn)
	h.SetFlags(x.Flags)
	h.SetJob(x.Job)
	h.SetSeq(x.Seq)
	h.SetAggregator(x.Aggregator)
	h.SetPriority(x.Priority)
	h.SetLevel(x.Level)
	for i, v := range x.Values {
		h.SetValue(i, v)
	}
	h.SetKey(x.Key)
	h.SetTensorLength(x.TensorLength)
	return nil
}

func decodeINAPS(data []byte, p gopacket.PacketBuilder) error {
	x := &INAPS{}
	if err := x.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(x)
	return p.NextDecoder(x.NextLayerType())
}

// decodeINAPSFrame decodes what follows an Ethernet header of EtherType
// 0x0700: the IPv4 header (whose protocol field says nothing of what
// follows: ATP's switch parses by EtherType), then the INA-PS header.
func decodeINAPSFrame(data []byte, p gopacket.PacketBuilder) error {
	ip := &layers.IPv4{}
	if err := ip.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(ip)
	p.SetNetworkLayer(ip)
	return p.NextDecoder(LayerTypeINAPS)
}
