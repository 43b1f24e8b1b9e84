package roce_test

import (
	"bytes"
	"testing"

	"github.com/inaemu/inaemu/roce"
)

// A ring MR (Len beyond its Buf) is Len bytes long for the bounds a
// responder checks and stores every write at its offset modulo the
// window, wrapping mid-write; a plain MR stores at the offset.
func TestMRRing(t *testing.T) {
	mr := &roce.MR{Addr: 0x1000, Buf: make([]byte, 8), Len: 100}
	if mr.Size() != 100 {
		t.Fatalf("size %d", mr.Size())
	}
	mr.Write(6, []byte{1, 2, 3, 4}) // 6, 7, then 0, 1
	if want := []byte{3, 4, 0, 0, 0, 0, 1, 2}; !bytes.Equal(mr.Buf, want) {
		t.Fatalf("ring write: % x, want % x", mr.Buf, want)
	}
	mr.Write(90, []byte{9}) // 90 mod 8 = 2
	if !bytes.Equal(mr.Buf[2:5], []byte{9, 0, 0}) {
		t.Fatalf("ring at: % x", mr.Buf)
	}
	got := make([]byte, 4)
	mr.Read(94, got) // 94 mod 8 = 6: 6, 7, then 0, 1
	if want := []byte{1, 2, 3, 4}; !bytes.Equal(got, want) {
		t.Fatalf("ring read: % x, want % x", got, want)
	}
	plain := &roce.MR{Addr: 0x1000, Buf: make([]byte, 8)}
	plain.Write(3, []byte{7, 7})
	if plain.Size() != 8 || !bytes.Equal(plain.Buf, []byte{0, 0, 0, 7, 7, 0, 0, 0}) {
		t.Fatalf("plain: % x", plain.Buf)
	}
	plain.Read(3, got[:3])
	if !bytes.Equal(got[:3], []byte{7, 7, 0}) {
		t.Fatalf("plain read: % x", got[:3])
	}
}
