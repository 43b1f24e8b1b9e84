package pcapio

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// benchCapture is a capture of n frames of size bytes, as the emulator
// writes it (pcapng) or as tcpdump -i any does (a classic pcap of Linux
// cooked frames).
func benchCapture(b *testing.B, lt layers.LinkType, ng bool, n, size int) []byte {
	b.Helper()
	var buf bytes.Buffer
	frame := make([]byte, size)
	frame[0] = 0x45
	if ng {
		w, err := pcapgo.NewNgWriterInterface(&buf, pcapgo.NgInterface{Name: "port0-in", LinkType: lt, TimestampResolution: 9}, pcapgo.NgWriterOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, int64(i)), CaptureLength: size, Length: size}, frame); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		return buf.Bytes()
	}
	w := pcapgo.NewWriter(&buf)
	if err := w.WriteFileHeader(262144, lt); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, int64(i)), CaptureLength: size, Length: size}, frame); err != nil {
			b.Fatal(err)
		}
	}
	return buf.Bytes()
}

// BenchmarkNext reads 10000 frames of 1100 bytes through Next.
func BenchmarkNext(b *testing.B) {
	for _, c := range []struct {
		name string
		lt   layers.LinkType
		ng   bool
	}{
		{"pcapng-ethernet", layers.LinkTypeEthernet, true},
		{"pcap-ethernet", layers.LinkTypeEthernet, false},
		{"pcap-sll", layers.LinkTypeLinuxSLL, false},
		{"pcap-raw", layers.LinkTypeRaw, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			const n, size = 10000, 1100
			data := benchCapture(b, c.lt, c.ng, n, size)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				r, err := NewReader("bench", bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				k := 0
				for {
					_, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					k++
				}
				if k != n {
					b.Fatalf("%d frames, want %d", k, n)
				}
			}
		})
	}
}
