// Package graphs draws the pictures people who work on RDMA transports
// look at every day, as SVG: PSN versus time per connection from any
// capture (the shape of Wireshark's tcptrace graph, with retransmissions,
// NAKs and injected faults marked), and bandwidth versus a swept
// parameter. It reads captures through wire formats only, like the
// capture checker.
package graphs

import (
	"fmt"
	"image/color"
	"io"
	"net/netip"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// Kind is what a point of a PSN trace is.
type Kind uint8

const (
	Data       Kind = iota // a request's first appearance at this vantage point
	Retransmit             // a request with a PSN at or below one already seen
	ACK                    // an acknowledgement (its PSN: the last one acknowledged)
	NAK                    // a NAK or RNR NAK (its PSN: the one it asks for)
	Fault                  // a frame an injected fault touched (capture comment)
)

func (k Kind) String() string {
	return [...]string{"data", "retransmission", "ACK", "NAK", "fault"}[k]
}

// Point is one frame of a connection: when, its PSN relative to the
// connection's first request (24-bit unwrapped), and what it is.
type Point struct {
	At    time.Duration
	PSN   int64
	Kind  Kind
	Frame int // Wireshark's frame number (1-based)
}

// Conn is one requester→responder connection, named by its addresses and
// the responder's QPN.
type Conn struct {
	Src, Dst netip.Addr
	DestQP   uint32
	// Link is the capture link (an interface, or the pair of a link's two
	// directions) the connection is drawn from: the one its first request
	// was seen on, so frames seen again further along are not mistaken
	// for retransmissions.
	Link    string
	first   uint32
	highest int64
	Points  []Point
}

func (c *Conn) String() string {
	return fmt.Sprintf("%v→%v QP %#x on %s", c.Src, c.Dst, c.DestQP, c.Link)
}

// rel is psn's distance from the connection's first PSN, taken in the
// signed 24-bit sense around the highest seen, so a trace longer than
// 2^24 PSNs stays continuous.
func (c *Conn) rel(psn uint32) int64 {
	d := int64(wire.PSNDiff(psn, uint32(uint64(int64(c.first)+c.highest)&wire.PSNMask)))
	return c.highest + d
}

// Traces groups a capture's RoCE frames by connection, in order of first
// appearance, each as seen on one link of the capture: the one its first
// request was seen on. names are the interfaces' names (nil for pcap); an
// interface X-in and X-out, or A-B and B-A, are the two directions of one
// link. A response (ACK, NAK) belongs to the connection between the same
// two addresses, the other way, whose requests' PSNs are nearest to its
// own (several QPs between two hosts have disjoint PSN spaces in
// practice). Frames that are not RoCE, and responses with no connection
// seen yet, are left out.
func Traces(recs []pcapio.Record, names []string) []*Conn {
	link := linkNames(names)
	linkOf := func(i int) string {
		if i < len(link) {
			return link[i]
		}
		return fmt.Sprint(i)
	}
	var conns []*Conn
	byKey := map[[3]any]*Conn{}
	var t0 time.Time
	for i, r := range recs {
		if i == 0 || r.Info.Timestamp.Before(t0) {
			t0 = r.Info.Timestamp
		}
	}
	var v frames.View
	for i, r := range recs {
		if v.Parse(r.Data) != nil {
			continue
		}
		at := r.Info.Timestamp.Sub(t0)
		where := linkOf(r.Info.InterfaceIndex)
		fault := false
		for _, cm := range r.Comments {
			fault = fault || strings.HasPrefix(cm, pcapio.FaultCommentPrefix)
		}
		op := v.Opcode()
		if op.IsAck() {
			c := nearest(conns, v.DstAddr(), v.SrcAddr(), v.PSN())
			if c == nil || c.Link != where {
				continue
			}
			k := ACK
			if s := v.AETH().Syndrome(); s.IsNAK() || s.IsRNRNAK() {
				k = NAK
			}
			if fault {
				k = Fault
			}
			c.Points = append(c.Points, Point{At: at, PSN: c.rel(v.PSN()), Kind: k, Frame: i + 1})
			continue
		}
		key := [3]any{v.SrcAddr(), v.DstAddr(), v.DestQP()}
		c := byKey[key]
		if c == nil {
			c = &Conn{Src: v.SrcAddr(), Dst: v.DstAddr(), DestQP: v.DestQP(), Link: where, first: v.PSN(), highest: -1}
			byKey[key] = c
			conns = append(conns, c)
		}
		if c.Link != where {
			continue
		}
		p := c.rel(v.PSN())
		k := Data
		switch {
		case fault:
			k = Fault
		case p <= c.highest:
			k = Retransmit
		}
		c.highest = max(c.highest, p)
		c.Points = append(c.Points, Point{At: at, PSN: p, Kind: k, Frame: i + 1})
	}
	return conns
}

// linkNames names each interface's link (see pcapio.LinkNames): X for
// X-in and X-out, A~B for A-B and B-A, the interface's own name otherwise.
func linkNames(names []string) []string {
	links := pcapio.LinkNames(names)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n
		if l, ok := links[n]; ok {
			out[i] = l.Link
		}
	}
	return out
}

// nearest is the connection src→dst whose latest request PSN is closest
// to psn.
func nearest(conns []*Conn, src, dst netip.Addr, psn uint32) *Conn {
	var best *Conn
	bestD := int64(1 << 62)
	for _, c := range conns {
		if c.Src != src || c.Dst != dst {
			continue
		}
		d := c.rel(psn) - c.highest
		if d < 0 {
			d = -d
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// PSNOptions choose what the PSN graph shows.
type PSNOptions struct {
	Title string
	// Max is the number of connections drawn (0: 8), the first ones seen.
	Max           int
	Width, Height vg.Length // 0: 24 cm × 15 cm
	// Format is svg (the default), png or pdf.
	Format string
}

// WritePSN draws the connections' PSN against time (SVG by default): each
// connection's requests in its own colour (dots; retransmissions as
// triangles), its ACKs as small rings and NAKs as crosses in that colour,
// and frames an injected fault touched as red squares.
func WritePSN(w io.Writer, conns []*Conn, o PSNOptions) error {
	if len(conns) == 0 {
		return fmt.Errorf("no RoCE connection in the capture")
	}
	if o.Max == 0 {
		o.Max = 8
	}
	if o.Width == 0 {
		o.Width, o.Height = 24*vg.Centimeter, 15*vg.Centimeter
	}
	p := plot.New()
	p.Title.Text = o.Title
	p.X.Label.Text = "time (µs)"
	p.Y.Label.Text = "PSN − first PSN"
	p.Legend.Top, p.Legend.Left = true, true
	shown := conns
	if len(shown) > o.Max {
		shown = shown[:o.Max]
	}
	faults := plotter.XYs{}
	for i, c := range shown {
		col := plotutil.Color(i)
		by := map[Kind]plotter.XYs{}
		for _, pt := range c.Points {
			xy := plotter.XY{X: float64(pt.At) / float64(time.Microsecond), Y: float64(pt.PSN)}
			if pt.Kind == Fault {
				faults = append(faults, xy)
				continue
			}
			by[pt.Kind] = append(by[pt.Kind], xy)
		}
		for _, k := range []Kind{Data, Retransmit, ACK, NAK} {
			if len(by[k]) == 0 {
				continue
			}
			s, err := plotter.NewScatter(by[k])
			if err != nil {
				return err
			}
			s.GlyphStyle = glyph(k, col)
			p.Add(s)
			if k == Data {
				p.Legend.Add(c.String(), s)
			} else if i == 0 {
				p.Legend.Add(k.String(), s)
			}
		}
	}
	if len(faults) > 0 {
		s, err := plotter.NewScatter(faults)
		if err != nil {
			return err
		}
		s.GlyphStyle = glyph(Fault, color.RGBA{R: 220, A: 255})
		p.Add(s)
		p.Legend.Add("injected fault", s)
	}
	if o.Format == "" {
		o.Format = "svg"
	}
	wt, err := p.WriterTo(o.Width, o.Height, o.Format)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

func glyph(k Kind, c color.Color) draw.GlyphStyle {
	g := draw.GlyphStyle{Color: c, Radius: vg.Points(1.2), Shape: draw.CircleGlyph{}}
	switch k {
	case Retransmit:
		g.Radius, g.Shape = vg.Points(2.5), draw.TriangleGlyph{}
	case ACK:
		g.Radius, g.Shape = vg.Points(1.5), draw.RingGlyph{}
	case NAK:
		g.Radius, g.Shape = vg.Points(3), draw.CrossGlyph{}
	case Fault:
		g.Radius, g.Shape = vg.Points(3), draw.SquareGlyph{}
	}
	return g
}
