package frames

import (
	"fmt"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/inaemu/inaemu/frames/wire"
)

// extLayer is what every extension header layer implements.
type extLayer interface {
	gopacket.DecodingLayer
	gopacket.Layer
	setBTH(*BTH)
}

// extBase carries the BTH an extension header belongs to, from which the
// header that follows it is known.
type extBase struct {
	layers.BaseLayer
	bth *BTH
}

func (e *extBase) setBTH(b *BTH) { e.bth = b }

func (e *extBase) next(h wire.Ext) gopacket.LayerType {
	if e.bth == nil {
		// Decoded without its BTH: nothing says what follows.
		return gopacket.LayerTypePayload
	}
	if n := e.bth.Opcode.Ext().Next(h); n != 0 {
		return extLayerType(n)
	}
	return e.bth.payloadType(e.Payload)
}

func (e *extBase) split(data []byte, n int, name string, df gopacket.DecodeFeedback) error {
	if len(data) < n {
		df.SetTruncated()
		return fmt.Errorf("%s: %d bytes, need %d", name, len(data), n)
	}
	e.BaseLayer = layers.BaseLayer{Contents: data[:n], Payload: data[n:]}
	return nil
}

func newExtLayer(h wire.Ext, b *BTH) extLayer {
	var l extLayer
	switch h {
	case wire.ExtRETH:
		l = &RETH{}
	case wire.ExtAETH:
		l = &AETH{}
	case wire.ExtImmDt:
		l = &ImmDt{}
	case wire.ExtIETH:
		l = &IETH{}
	case wire.ExtDETH:
		l = &DETH{}
	case wire.ExtAtomicETH:
		l = &AtomicETH{}
	case wire.ExtAtomicAckETH:
		l = &AtomicAckETH{}
	default:
		l = &FETH{}
	}
	l.setBTH(b)
	return l
}

// extDecoder decodes an extension header met outside decodeBTH (a user
// calling gopacket.NewPacket with an extension layer type as the first
// decoder); what follows it is then unknown and decoded as payload.
func extDecoder(h wire.Ext) gopacket.Decoder {
	return gopacket.DecodeFunc(func(data []byte, p gopacket.PacketBuilder) error {
		l := newExtLayer(h, nil)
		if err := l.DecodeFromBytes(data, p); err != nil {
			return err
		}
		p.AddLayer(l)
		return p.NextDecoder(l.NextLayerType())
	})
}
