package switching

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
)

// Report is a switch's report: the pipeline's counters and each
// installed program's own report (Program.Report), by program name.
type Report struct {
	Counters
	// Programs are the programs' reports by name. In a run's total
	// (Add), a program's reports are summed (ReportSum), or else kept as
	// a PerSwitch list.
	Programs map[string]any
	// Buffer is the shared buffer held per ingress port and priority that
	// saw traffic (Switch.Buffer); a run's total lists every switch's.
	Buffer []BufferUse
	// Egress is the buffer held per egress port and priority, with the
	// pauses each received (Switch.BufferEgress; JSON "buffer_egress",
	// absent for a switch whose buffer was never configured nor paused).
	Egress []EgressUse
}

// PerSwitch is a run's reports of one program that do not sum
// (ReportSum): each switch's that runs it, in the order they were added.
type PerSwitch []any

// Report is the pipeline's counters and its programs' reports.
func (s *Switch) Report() Report {
	r := Report{Counters: s.Stats, Buffer: s.Buffer(), Egress: s.BufferEgress()}
	for _, p := range s.programs {
		if r.Programs == nil {
			r.Programs = map[string]any{}
		}
		r.Programs[p.Name()] = p.Report()
	}
	return r
}

// Add adds another switch's report (a run's switches together).
func (r *Report) Add(x Report) {
	r.Counters.Add(x.Counters)
	r.Buffer = append(r.Buffer, x.Buffer...)
	r.Egress = append(r.Egress, x.Egress...)
	for name, v := range x.Programs {
		if r.Programs == nil {
			r.Programs = map[string]any{}
		}
		have, ok := r.Programs[name]
		switch {
		case !ok:
			if _, sums := v.(ReportSum); sums {
				r.Programs[name] = v
			} else {
				r.Programs[name] = PerSwitch{v}
			}
		case isSum(have):
			r.Programs[name] = have.(ReportSum).Sum(v)
		default:
			ps, _ := have.(PerSwitch)
			r.Programs[name] = append(ps, v)
		}
	}
}

func isSum(v any) bool { _, ok := v.(ReportSum); return ok }

// flatProgram is the program whose report is written flat (ReportFlat).
func flatProgram() (string, any) {
	for n, r := range programs {
		if r.flat != nil {
			return n, r.flat
		}
	}
	return "", nil
}

// MarshalJSON writes the flat program's report fields first (its zero
// value if no switch runs it), then the pipeline's counters, then every
// other program's report under its name, sorted. For compatibility: the
// switch report embedded NetReduce's counters beside the pipeline's
// before programs were plug-ins, so a NetReduce run's report is the same
// bytes as then, and readers of "switch.aggregations" keep working.
func (r Report) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	flat, zero := flatProgram()
	if flat != "" {
		v := zero
		if x, ok := r.Programs[flat]; ok {
			v = x
		}
		if err := appendFields(&b, v); err != nil {
			return nil, fmt.Errorf("switch program %s's report: %w", flat, err)
		}
	}
	if err := appendFields(&b, r.Counters); err != nil {
		return nil, err
	}
	if len(r.Buffer) > 0 {
		v, err := json.Marshal(r.Buffer)
		if err != nil {
			return nil, err
		}
		b.WriteString(`,"buffer":`)
		b.Write(v)
	}
	if len(r.Egress) > 0 {
		v, err := json.Marshal(r.Egress)
		if err != nil {
			return nil, err
		}
		b.WriteString(`,"buffer_egress":`)
		b.Write(v)
	}
	names := make([]string, 0, len(r.Programs))
	for n := range r.Programs {
		if n != flat {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		v, err := json.Marshal(r.Programs[n])
		if err != nil {
			return nil, fmt.Errorf("switch program %s's report: %w", n, err)
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(n)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// appendFields writes the fields of v's JSON object into b, after a
// comma if b has fields already.
func appendFields(b *bytes.Buffer, v any) error {
	o, err := json.Marshal(v)
	if err != nil {
		return err
	}
	o = bytes.TrimSpace(o)
	if len(o) < 2 || o[0] != '{' || o[len(o)-1] != '}' {
		return fmt.Errorf("a flat report must be a JSON object, not %.20s", o)
	}
	if inner := o[1 : len(o)-1]; len(inner) > 0 {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(inner)
	}
	return nil
}

// UnmarshalJSON reads what MarshalJSON writes: the counters, the flat
// program's report into a value of its registered type, and every other
// registered program's report as its raw JSON.
func (r *Report) UnmarshalJSON(data []byte) error {
	*r = Report{}
	if err := json.Unmarshal(data, &r.Counters); err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	if v, ok := fields["buffer"]; ok {
		if err := json.Unmarshal(v, &r.Buffer); err != nil {
			return err
		}
	}
	if v, ok := fields["buffer_egress"]; ok {
		if err := json.Unmarshal(v, &r.Egress); err != nil {
			return err
		}
	}
	if flat, zero := flatProgram(); flat != "" {
		p := reflect.New(reflect.TypeOf(zero))
		if err := json.Unmarshal(data, p.Interface()); err != nil {
			return err
		}
		r.Programs = map[string]any{flat: p.Elem().Interface()}
	}
	for k, v := range fields {
		if _, ok := programs[k]; ok {
			if r.Programs == nil {
				r.Programs = map[string]any{}
			}
			r.Programs[k] = v
		}
	}
	return nil
}

// DropReport is a program report that counts the aggregation frames it
// dropped for a bad ICRC and as forgeries (a member's frame from a port
// other than its connection's): what a run's ICRC total and a test that
// injected corruptions and forgeries count, whichever program aggregated.
type DropReport interface {
	AggregationDrops() (icrc, port uint64)
}

// AggregationDrops adds up the DropReports among the programs' reports.
func (r Report) AggregationDrops() (icrc, port uint64) {
	for _, rep := range r.Programs {
		if d, ok := rep.(DropReport); ok {
			i, p := d.AggregationDrops()
			icrc, port = icrc+i, port+p
		}
	}
	return icrc, port
}
