package frames

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/frames/wire"
)

// Summary is the decoded description of one captured frame, as
// `inaemu decode --json` prints it (one object per line). Pointer fields are
// null when the header is absent.
type Summary struct {
	Index      int            `json:"index"`
	RoCE       bool           `json:"roce"`
	Version    *string        `json:"version"`
	Transport  string         `json:"transport"`
	IP         *int           `json:"ip"`
	Src        string         `json:"src,omitempty"`
	Dst        string         `json:"dst,omitempty"`
	VLAN       *uint16        `json:"vlan"`
	Opcode     *uint8         `json:"opcode"`
	OpcodeName *string        `json:"opcode_name"`
	DQPN       *uint32        `json:"dqpn"`
	PSN        *uint32        `json:"psn"`
	AckReq     *bool          `json:"ackreq"`
	SE         *bool          `json:"se"`
	FECN       *bool          `json:"fecn"`
	BECN       *bool          `json:"becn"`
	PKey       *uint16        `json:"pkey"`
	PadCnt     *int           `json:"padcnt"`
	RETH       *RETHSummary   `json:"reth"`
	AETH       *AETHSummary   `json:"aeth"`
	Imm        *uint32        `json:"imm"`
	IETH       *uint32        `json:"ieth"`
	INA        *INASummary    `json:"ina"`
	INATree    *TreeSummary   `json:"ina_tree,omitempty"`
	PayloadLen *int           `json:"payload_len"`
	Compressed *PackedSummary `json:"compressed,omitempty"`
	ICRC       *string        `json:"icrc"`
	ICRCOK     *bool          `json:"icrc_ok"`
	FrameLen   int            `json:"frame_len"`
	Error      string         `json:"error,omitempty"`
}

type RETHSummary struct {
	VA   uint64 `json:"va"`
	RKey uint32 `json:"rkey"`
	DLen uint32 `json:"dlen"`
}

type AETHSummary struct {
	Syndrome uint8  `json:"syndrome"`
	MSN      uint32 `json:"msn"`
	Kind     string `json:"kind"`
}

// TreeSummary is a multi-rack switch-to-switch frame's INATree header.
type TreeSummary struct {
	Msg    uint32 `json:"msg"`
	Offset uint16 `json:"offset"`
	Flags  uint8  `json:"flags"`
	Ranks  uint64 `json:"ranks,omitempty"`     // partial, total: the ranks in the sum
	Block  int    `json:"block_len,omitempty"` // notification: its header block's length
}

// PackedSummary is a compressed payload (a WRITE or SEND marked with
// CompressedDSCP): what it unpacks to.
type PackedSummary struct {
	Bytes   int      `json:"bytes"`           // the uncompressed payload's length, L
	Ratio   float64  `json:"ratio"`           // L over the packed payload's length
	Classes [4]int64 `json:"classes"`         // values per class: 0, 8, 16 and 32 bits
	Error   string   `json:"error,omitempty"` // why it does not unpack
}

type INASummary struct {
	Tag    uint32 `json:"tag"`
	Ring   uint8  `json:"ring"`
	Msg    uint8  `json:"msg"`
	MsgLen uint8  `json:"msglen"`
	Rank   uint8  `json:"rank"`
}

func ptr[T any](v T) *T { return &v }

// Describe decodes frame into a Summary. A frame that is not RoCE, or whose
// RoCE headers are malformed, gets RoCE=false (with Error set when the frame
// looked like RoCE but was broken); bad ICRCs are data, not errors.
func Describe(index int, frame []byte) Summary {
	s := Summary{Index: index, FrameLen: len(frame), Transport: NotRoCE.String()}
	var v View
	if err := v.Parse(frame); err != nil {
		var pe ParseError
		if errors.As(err, &pe) && pe != ErrNotRoCE {
			s.Error = pe.Error()
		}
		return s
	}
	t := v.Transport()
	bth := v.BTH()
	s.RoCE = true
	s.Version = ptr(t.Version())
	s.Transport = t.String()
	if ipv := v.IPVersion(); ipv != 0 {
		s.IP = ptr(ipv)
	}
	s.Src, s.Dst = v.SrcAddr().String(), v.DstAddr().String()
	if v.VLANs() > 0 {
		s.VLAN = ptr(v.VLANID())
	}
	op := bth.Opcode()
	s.Opcode = ptr(uint8(op))
	s.OpcodeName = ptr(op.String())
	s.DQPN = ptr(bth.DestQP())
	s.PSN = ptr(bth.PSN())
	s.AckReq = ptr(bth.AckReq())
	s.SE = ptr(bth.SE())
	s.FECN = ptr(bth.FECN())
	s.BECN = ptr(bth.BECN())
	s.PKey = ptr(bth.PKey())
	s.PadCnt = ptr(bth.PadCnt())
	if r := v.RETH(); r != nil {
		s.RETH = &RETHSummary{VA: r.VA(), RKey: r.RKey(), DLen: r.DMALen()}
	}
	if a := v.AETH(); a != nil {
		s.AETH = &AETHSummary{Syndrome: uint8(a.Syndrome()), MSN: a.MSN(), Kind: a.Syndrome().String()}
	}
	if imm, ok := v.Imm(); ok {
		s.Imm = ptr(imm)
	}
	if k, ok := v.IETH(); ok {
		s.IETH = ptr(k)
	}
	h, tree := v.INATree()
	if tree == nil {
		h = v.INA()
	}
	if h != nil {
		s.INA = &INASummary{Tag: h.Tag(), Ring: h.RingID(), Msg: h.MsgID(), MsgLen: h.MsgLen(), Rank: h.Rank()}
	}
	if tree != nil {
		s.INATree = &TreeSummary{Msg: tree.Msg(), Offset: tree.Offset(), Flags: tree.Flags()}
		if v.Opcode() == wire.OpINANotify {
			s.INATree.Block = tree.BlockLen()
		} else {
			s.INATree.Ranks = tree.Ranks()
		}
	}
	s.PayloadLen = ptr(len(v.Payload()))
	if v.Compressed() {
		s.Compressed = describePacked(v.Payload())
	}
	s.ICRC = ptr(hex.EncodeToString(v.ICRCBytes()))
	s.ICRCOK = ptr(v.ICRCOK())
	return s
}

func describePacked(p []byte) *PackedSummary {
	var h inceptionn.Histogram
	out, err := inceptionn.Unpack(nil, p, &h)
	if err != nil {
		return &PackedSummary{Error: err.Error()}
	}
	return &PackedSummary{Bytes: len(out), Ratio: float64(len(out)) / float64(len(p)), Classes: h}
}

// Line is the one-line human form of a Summary, e.g.
//
//	3 v2-ipv4 10.0.0.1 > 10.0.0.2 RC_RDMA_WRITE_FIRST qp=0x000011 psn=5 A reth(va=0x1000 rkey=0x2a len=4096) len=1024 icrc=8eaf9f6c ok
func (s *Summary) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d ", s.Index)
	if !s.RoCE {
		b.WriteString("not-roce")
		fmt.Fprintf(&b, " len=%d", s.FrameLen)
		if s.Error != "" {
			fmt.Fprintf(&b, " malformed: %s", s.Error)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "%s %s > %s", s.Transport, s.Src, s.Dst)
	if s.VLAN != nil {
		fmt.Fprintf(&b, " vlan=%d", *s.VLAN)
	}
	fmt.Fprintf(&b, " %s qp=0x%06x psn=%d", *s.OpcodeName, *s.DQPN, *s.PSN)
	if *s.AckReq {
		b.WriteString(" A")
	}
	if *s.SE {
		b.WriteString(" SE")
	}
	if *s.FECN {
		b.WriteString(" FECN")
	}
	if *s.BECN {
		b.WriteString(" BECN")
	}
	if s.RETH != nil {
		fmt.Fprintf(&b, " reth(va=0x%x rkey=0x%x len=%d)", s.RETH.VA, s.RETH.RKey, s.RETH.DLen)
	}
	if s.AETH != nil {
		fmt.Fprintf(&b, " aeth(%s 0x%02x msn=%d)", s.AETH.Kind, s.AETH.Syndrome, s.AETH.MSN)
	}
	if s.Imm != nil {
		fmt.Fprintf(&b, " imm=0x%08x", *s.Imm)
	}
	if s.IETH != nil {
		fmt.Fprintf(&b, " ieth=0x%08x", *s.IETH)
	}
	if s.INA != nil {
		fmt.Fprintf(&b, " ina(ring=%d msg=%d msglen=%d rank=%d)", s.INA.Ring, s.INA.Msg, s.INA.MsgLen, s.INA.Rank)
	}
	if t := s.INATree; t != nil {
		fmt.Fprintf(&b, " tree(msg=%d off=%d flags=%#x", t.Msg, t.Offset, t.Flags)
		if t.Block > 0 {
			fmt.Fprintf(&b, " block=%d)", t.Block)
		} else {
			fmt.Fprintf(&b, " ranks=%#x)", t.Ranks)
		}
	}
	fmt.Fprintf(&b, " len=%d pad=%d icrc=%s", *s.PayloadLen, *s.PadCnt, *s.ICRC)
	if *s.ICRCOK {
		b.WriteString(" ok")
	} else {
		b.WriteString(" BAD")
	}
	if c := s.Compressed; c != nil {
		if c.Error != "" {
			fmt.Fprintf(&b, " compressed(BAD: %s)", c.Error)
		} else {
			fmt.Fprintf(&b, " compressed(L=%d %.2fx classes=%d/%d/%d/%d)", c.Bytes, c.Ratio, c.Classes[0], c.Classes[1], c.Classes[2], c.Classes[3])
		}
	}
	return b.String()
}
