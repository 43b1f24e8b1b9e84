// Package testvec loads the RoCE test vectors in testdata/vectors (frames made
// by scapy, Linux rxe and the original Soft-RoCE; see its README) and their
// manifest for tests.
package testvec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"

	"github.com/inaemu/inaemu/internal/pcapio"
)

// Frame is one manifest entry (the fields tests compare).
type Frame struct {
	File       string `json:"file"`
	FrameIndex int    `json:"frame_index"`
	Transport  string `json:"transport"`
	FrameLen   int    `json:"frame_len"`
	BTH        struct {
		Opcode   uint8  `json:"opcode"`
		Name     string `json:"opcode_name"`
		SE       int    `json:"se"`
		MigReq   int    `json:"migreq"`
		PadCount int    `json:"pad_count"`
		TVer     int    `json:"tver"`
		PKey     uint16 `json:"pkey"`
		FECN     int    `json:"fecn"`
		BECN     int    `json:"becn"`
		Resv6    int    `json:"resv6"`
		DestQP   uint32 `json:"dest_qp"`
		AckReq   int    `json:"ack_req"`
		Resv7    int    `json:"resv7"`
		PSN      uint32 `json:"psn"`
	} `json:"bth"`
	RETH *struct {
		VA     uint64 `json:"va"`
		RKey   uint32 `json:"rkey"`
		DMALen uint32 `json:"dma_len"`
	} `json:"reth"`
	AETH *struct {
		Syndrome uint8  `json:"syndrome"`
		MSN      uint32 `json:"msn"`
	} `json:"aeth"`
	ImmDt         *uint32 `json:"immdt"`
	IETH          *uint32 `json:"ieth"`
	PayloadLen    int     `json:"payload_len"`
	PayloadOffset int     `json:"payload_offset"`
	PayloadSHA256 string  `json:"payload_sha256"`
	PadHex        string  `json:"pad_hex"`
	ICRCOffset    int     `json:"icrc_offset"`
	TrailerLen    int     `json:"eth_trailer_len"`
	ICRCWire      string  `json:"icrc_wire_hex"`
	ICRCExpected  string  `json:"icrc_expected_hex"`
	ICRCValid     bool    `json:"icrc_valid"`
	BadKind       *string `json:"bad_icrc_kind"`
	VariantOf     *struct {
		File       string `json:"file"`
		FrameIndex int    `json:"frame_index"`
	} `json:"variant_of"`
	IP *struct {
		Src string `json:"src"`
		Dst string `json:"dst"`
	} `json:"ip"`
	IPv6 *struct {
		Src string `json:"src"`
		Dst string `json:"dst"`
	} `json:"ipv6"`
	GRH *struct {
		SGID string `json:"sgid"`
		DGID string `json:"dgid"`
	} `json:"grh"`
	UDP *struct {
		SPort uint16 `json:"sport"`
	} `json:"udp"`

	Data []byte `json:"-"` // the frame bytes from the pcap
}

// Dir is the absolute path of testdata/vectors.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "vectors")
}

// Load reads the manifest and attaches each frame's bytes.
func Load() ([]Frame, error) {
	raw, err := os.ReadFile(filepath.Join(Dir(), "manifest.json"))
	if err != nil {
		return nil, err
	}
	var m struct {
		Frames []Frame `json:"frames"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	files := map[string][]pcapio.Record{}
	for i := range m.Frames {
		f := &m.Frames[i]
		recs, ok := files[f.File]
		if !ok {
			recs, err = pcapio.ReadAll(filepath.Join(Dir(), f.File))
			if err != nil {
				return nil, err
			}
			files[f.File] = recs
		}
		f.Data = recs[f.FrameIndex].Data
	}
	return m.Frames, nil
}
