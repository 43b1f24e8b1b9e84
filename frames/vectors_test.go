package frames_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/testvec"
)

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestVectorsView checks the zero-copy view and the ICRC against every frame
// of the test vectors in testdata/vectors (made by scapy, Linux rxe and old
// Soft-RoCE).
func TestVectorsView(t *testing.T) {
	vecs, err := testvec.Load()
	require.NoError(t, err)
	require.Len(t, vecs, 70)
	byKey := map[string]testvec.Frame{}
	for _, f := range vecs {
		byKey[fmt.Sprintf("%s#%d", f.File, f.FrameIndex)] = f
	}
	for _, want := range vecs {
		t.Run(fmt.Sprintf("%s#%d", want.File, want.FrameIndex), func(t *testing.T) {
			var v frames.View
			require.NoError(t, v.Parse(want.Data))
			assert.Equal(t, want.Transport, v.Transport().String())
			assert.Equal(t, want.FrameLen, len(v.Frame()))
			b := v.BTH()
			assert.Equal(t, want.BTH.Opcode, uint8(b.Opcode()))
			assert.Equal(t, want.BTH.Name, b.Opcode().String())
			assert.Equal(t, want.BTH.SE, b2i(b.SE()))
			assert.Equal(t, want.BTH.MigReq, b2i(b.MigReq()))
			assert.Equal(t, want.BTH.PadCount, b.PadCnt())
			assert.Equal(t, want.BTH.TVer, int(b.TVer()))
			assert.Equal(t, want.BTH.PKey, b.PKey())
			assert.Equal(t, want.BTH.FECN, b2i(b.FECN()))
			assert.Equal(t, want.BTH.BECN, b2i(b.BECN()))
			assert.Equal(t, want.BTH.Resv6, int(b.Resv6()))
			assert.Equal(t, want.BTH.DestQP, b.DestQP())
			assert.Equal(t, want.BTH.AckReq, b2i(b.AckReq()))
			assert.Equal(t, want.BTH.Resv7, int(b.Resv7()))
			assert.Equal(t, want.BTH.PSN, b.PSN())
			if want.RETH != nil {
				r := v.RETH()
				require.NotNil(t, r)
				assert.Equal(t, want.RETH.VA, r.VA())
				assert.Equal(t, want.RETH.RKey, r.RKey())
				assert.Equal(t, want.RETH.DMALen, r.DMALen())
			} else {
				assert.Nil(t, v.RETH())
			}
			if want.AETH != nil {
				a := v.AETH()
				require.NotNil(t, a)
				assert.Equal(t, want.AETH.Syndrome, uint8(a.Syndrome()))
				assert.Equal(t, want.AETH.MSN, a.MSN())
			} else {
				assert.Nil(t, v.AETH())
			}
			imm, ok := v.Imm()
			assert.Equal(t, want.ImmDt != nil, ok)
			if ok {
				assert.Equal(t, *want.ImmDt, imm)
			}
			ieth, ok := v.IETH()
			assert.Equal(t, want.IETH != nil, ok)
			if ok {
				assert.Equal(t, *want.IETH, ieth)
			}
			assert.Equal(t, want.PayloadLen, len(v.Payload()))
			assert.Equal(t, want.PayloadOffset, v.PayloadOffset())
			sum := sha256.Sum256(v.Payload())
			assert.Equal(t, want.PayloadSHA256, hex.EncodeToString(sum[:]))
			assert.Equal(t, want.PadHex, hex.EncodeToString(v.Pad()))
			assert.Equal(t, want.ICRCOffset, v.ICRCOffset())
			assert.Equal(t, want.TrailerLen, v.TrailerLen())
			assert.Equal(t, want.ICRCWire, hex.EncodeToString(v.ICRCBytes()))
			var exp [4]byte
			binary.LittleEndian.PutUint32(exp[:], v.ICRC())
			assert.Equal(t, want.ICRCExpected, hex.EncodeToString(exp[:]), "computed ICRC")
			assert.Equal(t, want.ICRCValid, v.ICRCOK())
			if want.VariantOf != nil {
				base := byKey[fmt.Sprintf("%s#%d", want.VariantOf.File, want.VariantOf.FrameIndex)]
				assert.Equal(t, base.ICRCExpected, hex.EncodeToString(exp[:]), "variant keeps its base's ICRC")
			}
			switch {
			case want.IP != nil:
				assert.Equal(t, want.IP.Src, v.SrcAddr().String())
				assert.Equal(t, want.IP.Dst, v.DstAddr().String())
			case want.IPv6 != nil:
				assert.Equal(t, want.IPv6.Src, v.SrcAddr().String())
				assert.Equal(t, want.IPv6.Dst, v.DstAddr().String())
			case want.GRH != nil:
				assert.Equal(t, want.GRH.SGID, v.SrcAddr().String())
				assert.Equal(t, want.GRH.DGID, v.DstAddr().String())
			}
			if want.UDP != nil {
				assert.Equal(t, want.UDP.SPort, v.UDPSrcPort())
			}
		})
	}
}
