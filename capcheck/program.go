package capcheck

import (
	"cmp"
	"fmt"
	"sort"
	"strings"

	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// aggHeaderLen is, by switch program (the name a capture's section
// comment gives, pcapio.SwitchProgram), how many bytes of an aggregation
// WRITE FIRST's payload are header before the data the switch adds up.
// The header starts with NetReduce's INA fields either way (tag, RingID,
// MsgID, MsgLen, Rank), which the agg-sum rule reads. The checker judges
// wire formats and imports no program, so the table is kept here, with
// each length's public source:
//   - netreduce: the 8-byte INA header (NetReduce, ASPLOS '23, Fig. 4).
//   - ars: the AllReduce-Switch's 20-byte NCCL header (TCSI '21, Table
//     IV: Write First carries the 20-byte header and 1004 B of data).
var aggHeaderLen = map[string]int{
	pcapio.DefaultSwitchProgram: wire.INALen,
	"ars":                       20,
}

// aggHeader is the header length of program's aggregation WRITE FIRSTs
// ("": NetReduce's); a program the table does not know is an error, which
// leaves agg-sum not applied (Report.AggError: the verdict is
// undecidable, not conforming), since its data could start anywhere.
func aggHeader(program string) (int, error) {
	program = cmp.Or(program, pcapio.DefaultSwitchProgram)
	if n, ok := aggHeaderLen[program]; ok {
		return n, nil
	}
	return 0, fmt.Errorf("agg-sum not applied: switch program %q is not one the checker knows the aggregation header of (%s); give --switch-program", program, strings.Join(SwitchPrograms(), ", "))
}

// SwitchPrograms are the switch programs whose aggregation header the
// checker knows (CheckOptions.SwitchProgram), sorted.
func SwitchPrograms() []string {
	names := make([]string, 0, len(aggHeaderLen))
	for k := range aggHeaderLen {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
