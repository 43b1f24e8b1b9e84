//go:build !amd64

package tensor

func addLanesF32(d, s []float32) { addLanes(d, s) }
func addLanesU32(d, s []uint32)  { addLanes(d, s) }
