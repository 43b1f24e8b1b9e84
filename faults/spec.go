// Package faults holds the fault stages attached to one link direction:
// netem's random impairments (loss, Gilbert-Elliott bursts, delay with
// jitter, reorder with gap, duplicate, corrupt) and deterministic events
// matched on port, direction, frame class, QP, PSN, nth and every frame
// (Lumina-style), with the parser of the textual fault spec. It decides
// nothing about protocols: it only drops, copies, flips, delays and holds.
package faults

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Percentages follow netem: "1%" and "1" both mean one percent (tc reads a
// bare number as a percentage too). Values are stored as probabilities.

// maxCount bounds every count of frames a spec gives (nth, every, hold,
// gap): far beyond any run's frames, and an int on every platform.
const maxCount = 1 << 31

// ParsePercent reads a netem percentage ("0.5%", "0.5") as a probability.
func ParsePercent(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || !(v >= 0 && v <= 100) || s == "" || s == "%" {
		return 0, fmt.Errorf("%q is not a percentage from 0 to 100", s)
	}
	return v / 100, nil
}

// Netem is the random part of a stage, in netem's vocabulary.
type Netem struct {
	Loss      float64  // loss random P
	GE        *GEModel // loss gemodel p r 1-h 1-k (replaces Loss when set)
	Delay     time.Duration
	Jitter    time.Duration // normal around Delay, as netem's default distribution
	Reorder   float64       // reorder P: frames sent at once, ahead of delayed ones
	Gap       int           // reorder ... gap N: only every Nth frame may be reordered
	Duplicate float64
	Corrupt   float64 // one random bit flipped anywhere in the frame
}

// GEModel is netem's Gilbert-Elliott loss model: P is the probability to go
// from the good to the bad state, R back; in the bad state a frame is lost
// with probability 1-H, in the good state with 1-K.
type GEModel struct {
	P, R, OneMinusH, OneMinusK float64
}

// Zero reports whether the netem settings do nothing.
func (n *Netem) Zero() bool {
	return n.Loss == 0 && n.GE == nil && n.Delay == 0 && n.Jitter == 0 && n.Reorder == 0 && n.Duplicate == 0 && n.Corrupt == 0
}

// netemKeywords start a netem option; after "delay T", any other token is
// the jitter.
var netemKeywords = map[string]bool{"loss": true, "delay": true, "reorder": true, "duplicate": true, "corrupt": true}

// ParseNetem reads netem options, e.g. "loss gemodel 1% 10% delay 5us 1us
// reorder 25% gap 5 duplicate 1% corrupt 0.1%". Errors name the bad token.
func ParseNetem(s string) (Netem, error) {
	var n Netem
	toks := strings.Fields(s)
	bad := func(i int, why string) error {
		tok := "end of input"
		if i < len(toks) {
			tok = strconv.Quote(toks[i])
		}
		return fmt.Errorf("netem %q: bad token %s: %s", s, tok, why)
	}
	pct := func(i int) (float64, error) {
		if i >= len(toks) {
			return 0, bad(i, "a percentage is missing")
		}
		v, err := ParsePercent(toks[i])
		if err != nil {
			return 0, bad(i, err.Error())
		}
		return v, nil
	}
	isNum := func(i int) bool {
		if i >= len(toks) {
			return false
		}
		_, err := strconv.ParseFloat(strings.TrimSuffix(toks[i], "%"), 64)
		return err == nil
	}
	for i := 0; i < len(toks); i++ {
		var err error
		switch toks[i] {
		case "loss":
			i++
			switch {
			case i < len(toks) && toks[i] == "random":
				i++
				n.Loss, err = pct(i)
			case i < len(toks) && toks[i] == "gemodel":
				ge := &GEModel{OneMinusH: 1}
				if ge.P, err = pct(i + 1); err != nil {
					return n, err
				}
				i++
				ge.R = 1 - ge.P // netem's default when r is omitted
				// The optional r, 1-h and 1-k, as many as follow.
				for _, v := range []*float64{&ge.R, &ge.OneMinusH, &ge.OneMinusK} {
					if !isNum(i + 1) {
						break
					}
					i++
					if *v, err = pct(i); err != nil {
						return n, err
					}
				}
				n.GE = ge
			default:
				n.Loss, err = pct(i)
			}
		case "delay":
			i++
			if i >= len(toks) {
				return n, bad(i, "a delay is missing")
			}
			if n.Delay, err = ParseDuration(toks[i]); err != nil {
				return n, bad(i, err.Error())
			}
			if i+1 < len(toks) && !netemKeywords[toks[i+1]] { // the jitter
				i++
				if n.Jitter, err = ParseDuration(toks[i]); err != nil {
					return n, bad(i, err.Error())
				}
			}
		case "reorder":
			i++
			if n.Reorder, err = pct(i); err != nil {
				return n, err
			}
			if i+1 < len(toks) && toks[i+1] == "gap" {
				i += 2
				if i >= len(toks) {
					return n, bad(i, "gap needs a distance")
				}
				g, e := strconv.Atoi(toks[i])
				if e != nil || g < 1 || g > maxCount {
					return n, bad(i, fmt.Sprintf("gap must be a whole number of frames from 1 to %d", maxCount))
				}
				n.Gap = g
			}
		case "duplicate":
			i++
			n.Duplicate, err = pct(i)
		case "corrupt":
			i++
			n.Corrupt, err = pct(i)
		default:
			return n, bad(i, "expected loss, delay, reorder, duplicate or corrupt")
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Action is what a deterministic event does to the frames it matches.
type Action uint8

const (
	ActDrop Action = iota + 1
	ActDup
	ActCorrupt
	ActDelay
	ActHold
	// ActSpoof forges a copy of the frame (its payload altered, its ICRC
	// recomputed, so only the ingress port gives it away) that enters the
	// switch from another port, as a host there impersonating the sender.
	ActSpoof
)

func (a Action) String() string {
	return [...]string{"", "drop", "dup", "corrupt", "delay", "hold", "spoof"}[a]
}

// Dir is a link direction relative to the switch.
type Dir uint8

const (
	DirAny Dir = iota
	DirIn      // host → switch
	DirOut     // switch → host
)

func (d Dir) String() string { return [...]string{"any", "in", "out"}[d] }

// Class of frame an event matches.
type Class uint8

const (
	ClassAny  Class = iota
	ClassData       // requests: SEND, WRITE, READ request, atomics
	ClassAck        // ACKs and responses other than NAKs
	ClassNAK        // NAKs and RNR NAKs
	// ClassCNP is RoCEv2's congestion notification packet (BTH opcode
	// 0x81), which DCQCN's notification point sends back to a sender.
	ClassCNP
	// ClassPause is an IEEE 802.3 MAC Control frame (EtherType 0x8808:
	// an 802.1Qbb PFC frame) that a link's MAC sends: a fault on it is a
	// pause or resume lost, corrupted (the receiving MAC's FCS check
	// drops it), duplicated or late.
	ClassPause
)

func (c Class) String() string { return [...]string{"any", "data", "ack", "nak", "cnp", "pause"}[c] }

// Event is one deterministic fault: `ACTION key=value ...` (see Parse).
type Event struct {
	Action Action
	Delay  time.Duration // ActDelay
	Hold   int           // ActHold: release after this many later frames
	From   int           // ActSpoof: the switch port the forged copy enters by
	Port   int           // switch port (rank); -1 any
	Dir    Dir
	// Link, if set, names the one link direction the event applies to
	// ("leaf0-spine0", "h3-leaf0", on the star also "port3-in"); it
	// replaces port and dir.
	Link  string
	Class Class
	QP    int64   // destination QPN; -1 any
	PSN   int64   // -1 any
	Nth   int     // fire on the Nth matching frame (1-based); 0 any
	Every int     // fire on every Kth matching frame; 0 every one
	Prob  float64 // fire with this probability (1 = always)
	Spec  string  // the text it was parsed from, for annotations
}

// SpecText is the event's spec, "" for no event (a capture annotation
// names the event that fired, if one did).
func (e *Event) SpecText() string {
	if e == nil {
		return ""
	}
	return e.Spec
}

// Parse reads one --fault SPEC: `ACTION key=value ...`. ACTION is drop,
// dup, corrupt, delay=DURATION, hold=K or spoof=R (a forged copy enters
// the switch from port R; only on frames going into the switch); keys are
// link=NAME (one link direction of the topology, e.g. leaf0-spine0), or
// port=R and dir=in|out (host R's link: in is host to switch),
// class=data|ack|nak|cnp|pause|any, qp=N, psn=P, nth=K, every=K and prob=P% (a
// percentage, with its % sign unless it is 0). Errors name the bad
// token, and the range of values it takes.
func Parse(spec string) (Event, error) {
	ev := Event{Port: -1, QP: -1, PSN: -1, Prob: 1, Spec: spec}
	toks := strings.Fields(spec)
	bad := func(tok, why string) error {
		return fmt.Errorf("fault %q: bad token %q: %s", spec, tok, why)
	}
	if len(toks) == 0 {
		return ev, fmt.Errorf("fault %q: empty; expected ACTION key=value ... (e.g. 'drop port=0 dir=out class=data nth=1')", spec)
	}
	act, arg, hasArg := strings.Cut(toks[0], "=")
	switch act {
	case "drop", "dup", "corrupt":
		if hasArg {
			return ev, bad(toks[0], act+" takes no value")
		}
		ev.Action = map[string]Action{"drop": ActDrop, "dup": ActDup, "corrupt": ActCorrupt}[act]
	case "delay":
		d, err := ParseDuration(arg)
		switch {
		case errors.Is(err, ErrTooLong):
			return ev, bad(toks[0], err.Error())
		case !hasArg || err != nil || d == 0:
			return ev, bad(toks[0], "delay needs a positive duration, above 0 and up to "+maxDurationText()+", e.g. delay=20us")
		}
		ev.Action, ev.Delay = ActDelay, d
	case "hold":
		k, err := strconv.Atoi(arg)
		if !hasArg || err != nil || k < 1 || k > maxCount {
			return ev, bad(toks[0], fmt.Sprintf("hold needs a frame count from 1 to %d, e.g. hold=3", maxCount))
		}
		ev.Action, ev.Hold = ActHold, k
	case "spoof":
		k, err := strconv.Atoi(arg)
		if !hasArg || err != nil || k < 0 || k > 1<<16 {
			return ev, bad(toks[0], fmt.Sprintf("spoof needs the switch port the forgery enters by, from 0 to %d, e.g. spoof=2", 1<<16))
		}
		ev.Action, ev.From = ActSpoof, k
	default:
		return ev, bad(toks[0], "ACTION must be drop, dup, corrupt, delay=DURATION, hold=K or spoof=R")
	}
	seen := map[string]bool{}
	for _, tok := range toks[1:] {
		k, v, ok := strings.Cut(tok, "=")
		if !ok || v == "" {
			return ev, bad(tok, "expected key=value")
		}
		if seen[k] {
			return ev, bad(tok, "key "+k+" given twice")
		}
		seen[k] = true
		num := func(min int64, max int64) (int64, error) {
			n, err := strconv.ParseInt(v, 0, 64)
			if err != nil || n < min || n > max {
				return 0, bad(tok, fmt.Sprintf("%s must be a whole number from %d to %d", k, min, max))
			}
			return n, nil
		}
		var err error
		var n int64
		switch k {
		case "port":
			n, err = num(0, 1<<16)
			ev.Port = int(n)
		case "link":
			if v == "" || strings.ContainsAny(v, " \t=") {
				err = bad(tok, "link needs a link direction's name, e.g. link=leaf0-spine0 (inaemu topo show lists them)")
			}
			ev.Link = v
		case "dir":
			switch v {
			case "in":
				ev.Dir = DirIn
			case "out":
				ev.Dir = DirOut
			case "any":
				ev.Dir = DirAny
			default:
				err = bad(tok, "dir must be in (host→switch) or out (switch→host)")
			}
		case "class":
			switch v {
			case "data":
				ev.Class = ClassData
			case "ack":
				ev.Class = ClassAck
			case "nak":
				ev.Class = ClassNAK
			case "cnp":
				ev.Class = ClassCNP
			case "pause":
				ev.Class = ClassPause
			case "any":
				ev.Class = ClassAny
			default:
				err = bad(tok, "class must be data, ack, nak, cnp, pause or any")
			}
		case "qp":
			ev.QP, err = num(0, 0xFFFFFF)
		case "psn":
			ev.PSN, err = num(0, 0xFFFFFF)
		case "nth":
			n, err = num(1, maxCount)
			ev.Nth = int(n)
		case "every":
			n, err = num(1, maxCount)
			ev.Every = int(n)
		case "prob":
			var p float64
			switch p, err = ParsePercent(v); {
			case err != nil:
				err = bad(tok, err.Error())
			case p != 0 && !strings.HasSuffix(v, "%"):
				// The key says probability (0 to 1), netem says
				// percentage: read either way, prob=0.5 is 50 times the
				// other reading, and prob=2 is no probability at all.
				err = bad(tok, fmt.Sprintf("prob is a percentage from 0%% to 100%% written with its %% sign, e.g. prob=%s%%: a bare %s reads as a probability to some and as a percentage to others", v, v))
			}
			ev.Prob = p
		default:
			err = bad(tok, "unknown key; keys are link, port, dir, class, qp, psn, nth, every, prob")
		}
		if err != nil {
			return ev, err
		}
	}
	if ev.Link != "" && (seen["port"] || seen["dir"]) {
		return ev, fmt.Errorf("fault %q: link= names one link direction; leave out port= and dir=", spec)
	}
	if ev.Action == ActSpoof {
		switch {
		case ev.Link != "":
			return ev, fmt.Errorf("fault %q: spoof takes port=R (the member whose frames are forged), not link=", spec)
		case ev.Dir == DirOut:
			return ev, fmt.Errorf("fault %q: spoof forges frames going into the switch: use dir=in", spec)
		case ev.Port < 0:
			return ev, fmt.Errorf("fault %q: spoof needs port=R, the member whose frames are forged (without it the forgery would also come from the member's own port)", spec)
		case ev.Port == ev.From:
			return ev, fmt.Errorf("fault %q: spoof=%d is the frame's own port: a forgery must come from another", spec, ev.From)
		}
		ev.Dir = DirIn
	}
	return ev, nil
}
