package hierarchy

import (
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
)

// The child tables hash every segment of every path an op walks, on every
// replica. Segments are short (a name, "lock"), and for those a general
// string hash costs more than the rest of the probe, so up to 16 bytes are
// hashed here: the bytes are read as two words (overlapping, so that with
// the length they determine the segment), each is xored with a secret and
// the two are multiplied; the product's halves, with the length, are mixed
// the same way once more. Longer segments go to hash/maphash.
//
// The secrets are random per process, so clients cannot choose colliding
// names; nothing replicated depends on the hash (see kidSet).
var (
	kidSeed = maphash.MakeSeed()
	kidKey  = [4]uint64{rand.Uint64(), rand.Uint64(), rand.Uint64(), rand.Uint64()}
)

const shortName = 16 // longest segment hashed here

// hashName hashes a segment for the child tables.
func hashName(seg string) uint32 {
	if len(seg) > shortName {
		return uint32(maphash.String(kidSeed, seg))
	}
	a, b := nameWords(seg)
	hi, lo := bits.Mul64(a^kidKey[0], b^kidKey[1])
	// The length goes in after the first product: segments of different
	// lengths can pack alike ("aaaaaaaaa", "aaaaaaaaaa").
	hi, lo = bits.Mul64(hi^kidKey[2], lo^kidKey[3]^uint64(len(seg)))
	return uint32(hi ^ lo)
}

// nameWords packs a segment of up to shortName bytes into two words that,
// with its length, determine it.
func nameWords(seg string) (a, b uint64) {
	switch n := len(seg); {
	case n >= 8:
		return load64(seg), load64(seg[n-8:])
	case n >= 4:
		return uint64(load32(seg)), uint64(load32(seg[n-4:]))
	case n > 0:
		return uint64(seg[0])<<16 | uint64(seg[n>>1])<<8 | uint64(seg[n-1]), 0
	}
	return 0, 0
}

// load64 and load32 read the first bytes of s, little-endian (the compiler
// turns each into one load).
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func load32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}
