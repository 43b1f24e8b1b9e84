package frames_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// refIPv4Checksum is RFC 791's header checksum, recomputed from scratch:
// the ones' complement of the ones' complement sum of the header's 16-bit
// words, the checksum field taken as zero.
func refIPv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		if i == 10 {
			continue
		}
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s>>16 != 0 {
		s = s&0xFFFF + s>>16
	}
	return ^uint16(s)
}

// SetIPv4TOS's incremental update agrees with a full recomputation for
// random headers and every TOS value.
func TestSetIPv4TOSMatchesRecomputation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := make([]byte, 20)
	for i := 0; i < 2000; i++ {
		for j := range h {
			h[j] = byte(rng.UintN(256))
		}
		h[0] = 0x45
		binary.BigEndian.PutUint16(h[10:], refIPv4Checksum(h))
		tos := byte(rng.UintN(256))
		frames.SetIPv4TOS(h, tos)
		require.Equal(t, tos, h[1])
		require.Equal(t, refIPv4Checksum(h), binary.BigEndian.Uint16(h[10:]), "header %x", h)
	}
}

// SetECN on every transport: the ECN bits change, the codepoint and every
// other byte stay (but the IPv4 checksum, which becomes the recomputed
// one), and the ICRC stays valid (it reads the traffic class as ones).
func TestSetECNKeepsCodepointAndICRC(t *testing.T) {
	for _, path := range ioPaths() {
		path.TClass = 26<<2 | frames.ECNECT0
		b, err := frames.NewBuilder(path)
		require.NoError(t, err)
		raw := make([]byte, 512)
		n, err := b.Build(raw, &frames.Packet{Opcode: wire.WriteMiddle, PSN: 7, Payload: make([]byte, 256)})
		require.NoError(t, err)
		orig := append([]byte(nil), raw[:n]...)
		var v frames.View
		require.NoError(t, v.Parse(raw[:n]))
		require.Equal(t, frames.ECNECT0, v.ECN())
		require.False(t, v.CE())
		for _, e := range []uint8{frames.ECNCE, frames.ECNNotECT, frames.ECNECT1, frames.ECNECT0} {
			v.SetECN(e)
			var w frames.View
			require.NoError(t, w.Parse(raw[:n]))
			assert.Equal(t, e, w.ECN(), "%v", path.Transport)
			assert.Equal(t, e == frames.ECNCE, w.CE())
			assert.Equal(t, uint8(26), w.DSCP(), "%v: the codepoint stays", path.Transport)
			assert.True(t, w.ICRCOK(), "%v: the ICRC masks the traffic class", path.Transport)
			diff := 0
			for i := range orig {
				if orig[i] != raw[i] {
					diff++
				}
			}
			if path.Transport == frames.V2IPv4 {
				l3 := w.L3()
				assert.Equal(t, refIPv4Checksum(l3[:20]), binary.BigEndian.Uint16(l3[10:]))
				assert.LessOrEqual(t, diff, 3, "TOS and checksum only")
			} else {
				assert.LessOrEqual(t, diff, 1, "one byte of the traffic class")
			}
		}
		assert.Equal(t, orig, raw[:n], "%v: back to ECT(0), the frame as built", path.Transport)
	}
}
