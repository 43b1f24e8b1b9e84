package roce_test

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/inaemu/inaemu/roce"
)

// Property tests of READ and atomics under every fault the harness
// injects (loss, duplication, corruption, a frame held back behind the
// next one, or past the timeout when no next one comes), long READs,
// and PSNs that wrap. The reference is a serial model written here: one
// RC connection executes its requests in PSN order, so a READ sees B's
// memory, the k-th fetch-and-add returns the start value plus the adds
// before it, and a compare-and-swap chain whose every compare names the
// value the previous swap wrote succeeds at every link.

// Kinds of operation in a generated mix.
const (
	opWrite = iota
	opRead
	opFetchAdd
	opCompSwap
)

type rwOp struct {
	Kind int
	Size int    // bytes (WRITE and READ)
	Add  uint64 // fetch-and-add operand
}

type rwScenario struct {
	Ops      []rwOp
	MTU      int
	StartPSN uint32
	Profile  roce.Profile
	RdAtomic int // max_rd_atomic and max_dest_rd_atomic of both QPs
	Counter  uint64
	Faults   []fault
}

func (s rwScenario) String() string {
	return fmt.Sprintf("ops=%+v mtu=%d psn=%#x profile=%s rd_atomic=%d counter=%#x faults=%+v", s.Ops, s.MTU, s.StartPSN, s.Profile, s.RdAtomic, s.Counter, s.Faults)
}

// B's memory: READs read [0, readEnd), WRITEs write from writeAt on,
// fetch-and-adds hit the counter at faaAt and compare-and-swaps the word
// at casAt. The regions are disjoint, so a READ re-executed after a later
// WRITE (go-back-N resends both) still reads what the model says.
const (
	rwMem   = 1 << 16
	readEnd = 24 << 10
	writeAt = 24 << 10
	faaAt   = 60 << 10
	casAt   = faaAt + 8
	maxOps  = 8
)

func genRWScenario() gopter.Gen {
	return gen.Struct(reflect.TypeOf(rwScenario{}), map[string]gopter.Gen{
		"Ops": gen.SliceOfN(maxOps, gen.Struct(reflect.TypeOf(rwOp{}), map[string]gopter.Gen{
			"Kind": gen.IntRange(opWrite, opCompSwap),
			// Mostly up to 12 packets of 256 bytes; sometimes a long READ
			// of 62..79 packets (past the 66-packet AckReq mark for WRITEs).
			"Size": gen.Weighted([]gen.WeightedGen{{Weight: 4, Gen: gen.IntRange(0, 3000)}, {Weight: 1, Gen: gen.IntRange(16000, 20000)}}),
			"Add":  gen.UInt64(),
		})),
		"MTU":      gen.OneConstOf(256, 512, 1024),
		"StartPSN": gen.OneConstOf(uint32(0), uint32(100), uint32(0xFFFFF0), uint32(0xFFFFFE)),
		"Profile":  gen.OneConstOf(roce.Commodity, roce.RXE),
		"RdAtomic": gen.OneConstOf(1, 2, 3, 16),
		"Counter":  gen.UInt64(),
		"Faults": gen.SliceOfN(6, gen.Struct(reflect.TypeOf(fault{}), map[string]gopter.Gen{
			"Dir":     gen.IntRange(0, 1),
			"Nth":     gen.IntRange(0, 60),
			"Verdict": gen.IntRange(int(pass), int(hold)),
		})),
	})
}

// casValue is the k-th value of the compare-and-swap chain.
func casValue(k int) uint64 { return 0x9E3779B97F4A7C15 * uint64(k+1) }

// runRW runs one scenario and returns "" or what went wrong.
func runRW(t *testing.T, sc rwScenario) string {
	cfg := roce.Config{MTU: sc.MTU, SQPSN: sc.StartPSN, RQPSN: sc.StartPSN, Timeout: 8, RetryCnt: 7, RNRRetry: 7, Profile: sc.Profile,
		MaxRdAtomic: sc.RdAtomic, MaxDestRdAtomic: sc.RdAtomic}
	h := newHarness(t, cfg, cfg, rwMem)
	copy(h.hosts[1].mem, pattern(readEnd, 0x5A))
	binary.LittleEndian.PutUint64(h.hosts[1].mem[faaAt:], sc.Counter)
	binary.LittleEndian.PutUint64(h.hosts[1].mem[casAt:], casValue(0))
	count := [2]int{}
	h.fault = func(e *wireEvent) verdict {
		n := count[e.dir]
		count[e.dir]++
		for _, f := range sc.Faults {
			if f.Dir == e.dir && f.Nth == n && verdict(f.Verdict) != pass {
				return verdict(f.Verdict)
			}
		}
		return pass
	}
	type posted struct {
		op   rwOp
		buf  []byte
		want []byte // READ: B's bytes; atomics: the original value the model predicts
		off  int
	}
	var ps []posted
	woff, counter, cas := writeAt, sc.Counter, 0
	for i, op := range sc.Ops {
		if op.Size < 0 { // the shrinker may leave the generator's range
			op.Size = -op.Size
		}
		op.Size %= 20001
		p := posted{op: op}
		wr := roce.SendWR{ID: uint64(i), RKey: memKey, Signaled: true}
		switch op.Kind {
		case opWrite:
			n := op.Size % 3001
			p.buf, p.off = pattern(n, byte(i+1)), woff
			wr.Opcode, wr.Local, wr.RemoteVA = roce.WRWrite, p.buf, memVA+uint64(woff)
			woff += n
		case opRead:
			n := op.Size
			off := (i * 977) % (readEnd - n + 1)
			p.buf, p.off = make([]byte, n), off
			p.want = append([]byte(nil), h.hosts[1].mem[off:off+n]...)
			wr.Opcode, wr.Local, wr.RemoteVA = roce.WRRead, p.buf, memVA+uint64(off)
		case opFetchAdd:
			p.buf = make([]byte, 8)
			p.want = binary.LittleEndian.AppendUint64(nil, counter)
			counter += op.Add
			wr.Opcode, wr.Local, wr.RemoteVA, wr.SwapAdd = roce.WRFetchAdd, p.buf, memVA+faaAt, op.Add
		case opCompSwap:
			p.buf = make([]byte, 8)
			p.want = binary.LittleEndian.AppendUint64(nil, casValue(cas))
			wr.Opcode, wr.Local, wr.RemoteVA = roce.WRCompSwap, p.buf, memVA+casAt
			wr.Compare, wr.SwapAdd = casValue(cas), casValue(cas+1)
			cas++
		}
		if err := h.hosts[0].qp.PostSend(wr); err != nil {
			return err.Error()
		}
		ps = append(ps, p)
	}
	h.run(2 * time.Second)
	cs := poll(h.hosts[0].cq)
	if len(cs) != len(ps) {
		return fmt.Sprintf("%d completions for %d WRs: %v", len(cs), len(ps), cs)
	}
	for i, c := range cs {
		if c.Status != roce.StatusSuccess || c.WRID != uint64(i) {
			return fmt.Sprintf("completion %d: %s", i, c)
		}
	}
	for i, p := range ps {
		switch p.op.Kind {
		case opWrite:
			if got := h.hosts[1].mem[p.off : p.off+len(p.buf)]; string(got) != string(p.buf) {
				return fmt.Sprintf("WRITE %d not byte-exact", i)
			}
		case opRead:
			if string(p.buf) != string(p.want) {
				return fmt.Sprintf("READ %d (%d bytes at %d) not bit-exact", i, len(p.buf), p.off)
			}
		default:
			if string(p.buf) != string(p.want) {
				name := map[int]string{opFetchAdd: "fetch-and-add", opCompSwap: "compare-and-swap"}[p.op.Kind]
				return fmt.Sprintf("%s %d returned %#x, the serial order says %#x", name,
					i, binary.LittleEndian.Uint64(p.buf), binary.LittleEndian.Uint64(p.want))
			}
		}
	}
	if got := binary.LittleEndian.Uint64(h.hosts[1].mem[faaAt:]); got != counter {
		return fmt.Sprintf("counter %#x, want start plus the adds %#x (an add executed twice or lost)", got, counter)
	}
	if got := binary.LittleEndian.Uint64(h.hosts[1].mem[casAt:]); got != casValue(cas) {
		return fmt.Sprintf("compare-and-swap word %#x, the chain ends at %#x", got, casValue(cas))
	}
	if n := h.hosts[1].qp.Counters.AtomicsExecuted; n != uint64(cas+countKind(sc.Ops, opFetchAdd)) {
		return fmt.Sprintf("%d atomics executed for %d posted", n, cas+countKind(sc.Ops, opFetchAdd))
	}
	if h.clock.Pending() != 0 {
		return "timers still pending after completion"
	}
	return ""
}

func countKind(ops []rwOp, k int) int {
	n := 0
	for _, o := range ops {
		if o.Kind == k {
			n++
		}
	}
	return n
}

// TestPropertyReadAtomicUnderFaults: for generated mixes of WRITE, READ,
// fetch-and-add and compare-and-swap, both NIC profiles and schedules of
// at most six faults, every WR completes successfully and in order; every
// READ returns B's memory bit for bit; each fetch-and-add returns the
// value the serial order predicts and the counter ends at the start value
// plus exactly the sum of the adds; every link of the compare-and-swap
// chain holds; the responder executes each atomic exactly once, also when
// max_rd_atomic and the responder's resources are as few as one.
func TestPropertyReadAtomicUnderFaults(t *testing.T) {
	params := gopter.DefaultTestParametersWithSeed(propSeed)
	params.MinSuccessfulTests = 300
	t.Logf("gopter seed %d (replay: go test ./roce -run TestPropertyReadAtomicUnderFaults)", propSeed)
	props := gopter.NewProperties(params)
	props.Property("READ bit-exact, atomics serial and once", prop.ForAll(func(sc rwScenario) string {
		return runRW(t, sc)
	}, genRWScenario()))
	props.TestingRun(t)
}

// TestPropertyFetchAddStorm: only fetch-and-adds, many of them, with the
// ACK direction hit hardest (lost and duplicated ATOMIC ACKNOWLEDGEs are
// what tempts a responder to execute twice).
func TestPropertyFetchAddStorm(t *testing.T) {
	params := gopter.DefaultTestParametersWithSeed(propSeed + 1)
	params.MinSuccessfulTests = 200
	props := gopter.NewProperties(params)
	props.Property("N fetch-and-adds sum exactly", prop.ForAll(func(adds []uint64, faults []fault, start uint32, counter uint64) string {
		sc := rwScenario{MTU: 256, StartPSN: start, Counter: counter, Faults: faults}
		for _, a := range adds {
			sc.Ops = append(sc.Ops, rwOp{Kind: opFetchAdd, Add: a})
		}
		if len(sc.Ops) > maxOps {
			sc.Ops = sc.Ops[:maxOps]
		}
		return runRW(t, sc)
	}, gen.SliceOfN(maxOps, gen.UInt64Range(0, 1<<20)),
		gen.SliceOfN(6, gen.Struct(reflect.TypeOf(fault{}), map[string]gopter.Gen{
			"Dir":     gen.Weighted([]gen.WeightedGen{{Weight: 1, Gen: gen.Const(0)}, {Weight: 3, Gen: gen.Const(1)}}),
			"Nth":     gen.IntRange(0, 12),
			"Verdict": gen.IntRange(int(pass), int(hold)),
		})),
		gen.OneConstOf(uint32(0xFFFFFB), uint32(7)), gen.UInt64()))
	props.TestingRun(t)
}
