package inaps

import "hash/crc32"

// Slots is the window cap: a worker's window never exceeds it, so the
// aggregator index of sequence number s is its slot (s-1) mod Slots's,
// and a job's tasks in flight never share an aggregator.
const Slots = 256

// IndexTable is the aggregator index of each window slot of job id in a
// pool of n aggregators, as ATP's hosts fill theirs (HashNew_crc): a
// CRC-32 over (job, slot, salt) truncated to 16 bits, mod n, the salt
// raised until the index is not one the job already uses, so a job never
// collides with itself (while it has fewer slots than the pool has
// aggregators). Every worker and the PS of a job compute the same table.
func IndexTable(id uint16, n int) []uint16 {
	t := make([]uint16, Slots)
	used := make(map[uint16]bool, Slots)
	for slot := range t {
		for salt := uint16(0); ; salt++ {
			k := SaltedIndex(id, uint16(slot), salt, n)
			if !used[k] || len(used) >= n || salt == 0xffff {
				t[slot], used[k] = k, true
				break
			}
		}
	}
	return t
}

// SaltedIndex is one salted hash of (job, slot) into a pool of n.
func SaltedIndex(id, slot, salt uint16, n int) uint16 {
	b := [6]byte{byte(id), byte(id >> 8), byte(slot), byte(slot >> 8), byte(salt), byte(salt >> 8)}
	return uint16(int(crc32.ChecksumIEEE(b[:])&0xffff) % n)
}

// StaticIndex is a SwitchML-style job's aggregator for its n-th packet
// (counted from 1 over the whole job, iteration after iteration, as
// SwitchML's pool indices run on) in its region [first, first+size):
// half the region is a shadow set, consecutive rounds of a slot
// alternate between the two. Counting per iteration instead would put a
// new iteration's first packets in the sets the last one's results still
// sit in, before a slower worker has them.
func StaticIndex(first, size int, n uint64) uint16 {
	half := uint64(size / 2)
	s := (n - 1) % half
	set := (n - 1) / half % 2
	return uint16(uint64(first) + set*half + s)
}
