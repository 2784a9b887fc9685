package wire

import (
	"encoding/binary"
	"encoding/hex"
	"math"
)

// Range bounds are route keys: the 64-bit hash of a namespace (RouteKey),
// which no tool can turn back into a path. People see them as 16 hex
// digits, with the share of the key space a range covers beside them.

// RouteKeyHex shows a range bound as hex ("" stays "": the start or the end
// of the key space).
func RouteKeyHex(k string) string { return hex.EncodeToString([]byte(k)) }

// RangeShare is the fraction of the route key space in [start, end) ("" is
// the start, or the end, of the space).
func RangeShare(start, end string) float64 {
	e := math.Exp2(64)
	if end != "" {
		e = keyPosition(end)
	}
	return (e - keyPosition(start)) / math.Exp2(64)
}

// keyPosition is k's position in the key space: its first eight bytes,
// big-endian (a shorter key is padded with zeros).
func keyPosition(k string) float64 {
	var b [8]byte
	copy(b[:], k)
	return float64(binary.BigEndian.Uint64(b[:]))
}
