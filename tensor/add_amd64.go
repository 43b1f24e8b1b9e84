package tensor

// addF32 and addU32 (add_amd64.s) add n elements of s into d with SSE2,
// which every amd64 processor has: the same IEEE single-precision (or
// wrapping) additions as the Go loop, four lanes per instruction.
//
//go:noescape
func addF32(d, s *float32, n int)

//go:noescape
func addU32(d, s *uint32, n int)

func addLanesF32(d, s []float32) { addF32(&d[0], &s[0], min(len(d), len(s))) }
func addLanesU32(d, s []uint32)  { addU32(&d[0], &s[0], min(len(d), len(s))) }
