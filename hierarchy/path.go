package hierarchy

import (
	"math/bits"
	"strings"
	"unicode/utf8"

	"github.com/wardenlock/warden/wire"
)

// Limits bound the paths the trie accepts.
type Limits struct {
	MaxPathBytes int // default 512
	MaxDepth     int // default 32
}

// DefaultLimits are the limits used when a config leaves them zero.
var DefaultLimits = Limits{MaxPathBytes: 512, MaxDepth: 32}

func (l Limits) withDefaults() Limits {
	if l.MaxPathBytes <= 0 {
		l.MaxPathBytes = DefaultLimits.MaxPathBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	return l
}

// Validate checks that p is a normalised absolute path: "/" or "/seg(/seg)*"
// with no empty, "." or ".." segment, no control characters, valid UTF-8,
// and within the limits. The error is a *wire.Error with code InvalidArgument that says what
// is wrong.
func Validate(p string, lim Limits) error {
	lim = lim.withDefaults()
	if plainPath(p, lim) {
		return nil
	}
	return whyInvalid(p, lim)
}

// plainPath is Validate's fast road, run on every request path on every
// replica: one pass that accepts only valid paths and leaves anything else
// (the root, a bad byte or segment, a limit passed) to whyInvalid, which
// decides and explains. It reads eight bytes at a time and stops only at
// the ones that need a look (see marked).
func plainPath(p string, lim Limits) bool {
	if len(p) < 2 || p[0] != '/' || len(p) > lim.MaxPathBytes {
		return false
	}
	depth, start, i := 0, 1, 1
	var seen uint64 // every byte's top bit: set when a byte is not ASCII
	for ; i+8 <= len(p); i += 8 {
		w := load64(p[i:])
		seen |= w
		for m := marked(w); m != 0; m &= m - 1 {
			j := i + bits.TrailingZeros64(m)/8
			if p[j] != '/' || badSegment(p[start:j]) {
				return false
			}
			depth, start = depth+1, j+1
		}
	}
	for ; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == 0x7f {
			return false
		} else if c == '/' {
			if badSegment(p[start:i]) {
				return false
			}
			depth, start = depth+1, i+1
		} else {
			seen |= uint64(c)
		}
	}
	if seen&high != 0 && !utf8.ValidString(p) { // only paths with non-ASCII bytes pay
		return false
	}
	return !badSegment(p[start:]) && depth+1 <= lim.MaxDepth
}

const (
	low7 = 0x7f7f7f7f7f7f7f7f
	high = 0x8080808080808080
	ones = 0x0101010101010101
)

// marked sets bit 7 of each byte of w (eight path bytes, little-endian)
// that is a control byte, DEL or '/', and clears every other bit. Each test
// adds to the low seven bits of every byte, which never carries into the
// next byte; bytes from 0x80 up (UTF-8) are never marked.
func marked(w uint64) uint64 {
	x := w & low7
	control := ^(x + (0x80-0x20)*ones) // bit 7 set: below 0x20
	del := x + ones                    // bit 7 set: 0x7f
	slash := ^((x ^ '/'*ones) + low7)  // bit 7 set: '/'
	return (control | del | slash) &^ w & high
}

func badSegment(seg string) bool {
	return len(seg) <= 2 && (seg == "" || seg == "." || seg == "..")
}

// whyInvalid is Validate's careful road: nil for a valid path, else an
// InvalidArgument error that says what is wrong.
func whyInvalid(p string, lim Limits) error {
	if p == "" {
		return wire.Errorf(wire.InvalidArgument, "empty path")
	}
	if p[0] != '/' {
		return wire.Errorf(wire.InvalidArgument, "path %q is not absolute (must start with /)", p)
	}
	if len(p) > lim.MaxPathBytes {
		return wire.Errorf(wire.InvalidArgument, "path is %d bytes, over the limit of %d", len(p), lim.MaxPathBytes)
	}
	if p == "/" {
		return nil
	}
	if !utf8.ValidString(p) {
		return wire.Errorf(wire.InvalidArgument, "path %q is not valid UTF-8", p)
	}
	depth := 0
	start := 1
	for i := 1; i <= len(p); i++ {
		if i < len(p) {
			c := p[i]
			if c < 0x20 || c == 0x7f {
				return wire.Errorf(wire.InvalidArgument, "path %q has a control character at byte %d", p, i)
			}
			if c != '/' {
				continue
			}
		}
		seg := p[start:i]
		switch seg {
		case "":
			if i == len(p) {
				return wire.Errorf(wire.InvalidArgument, "path %q ends with /", p)
			}
			return wire.Errorf(wire.InvalidArgument, "path %q has an empty segment", p)
		case ".", "..":
			return wire.Errorf(wire.InvalidArgument, "path %q has a %q segment", p, seg)
		}
		depth++
		if depth > lim.MaxDepth {
			return wire.Errorf(wire.InvalidArgument, "path %q is deeper than %d levels", p, lim.MaxDepth)
		}
		start = i + 1
	}
	return nil
}

// Depth returns the number of segments of a valid path ("/" has depth 0).
func Depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// Key encodes a valid path as an ordered key: segments joined by 0x00. Because
// 0x00 sorts below every byte a segment may hold, the keys of a path's whole
// subtree form one contiguous interval [Key(p), SubtreeEnd(p)), which is what
// lets ranges be cut at namespace boundaries.
func Key(p string) string {
	if p == "/" {
		return ""
	}
	return strings.ReplaceAll(p[1:], "/", "\x00")
}

// PathOf is the inverse of Key.
func PathOf(key string) string {
	return "/" + strings.ReplaceAll(key, "\x00", "/")
}

// SubtreeEnd is the exclusive upper bound of the keys in p's subtree; "" means
// unbounded (the root's subtree is everything).
func SubtreeEnd(p string) string {
	if p == "/" {
		return ""
	}
	return Key(p) + "\x01"
}

// Namespace returns the first depth segments of p (p itself when shallower):
// the unit that ranges are cut on.
func Namespace(p string, depth int) string { return wire.Namespace(p, depth) }

// RouteKey is the position of a namespace in the range key space (see
// wire.RouteKey, which clients use to route too).
func RouteKey(ns string) string { return wire.RouteKey(ns) }

// Span returns the key interval [start, end) that a request on p touches when
// ranges are cut at the given namespace depth (see wire.Span).
func Span(p string, depth int) (start, end string) { return wire.Span(p, depth) }

// SpanInto is Span without an allocation (wire.SpanInto): the keys are
// views of buf, to be compared, or cloned before they are kept.
func SpanInto(p string, depth int, buf *wire.SpanBuf) (start, end string) {
	return wire.SpanInto(p, depth, buf)
}

// InRange reports whether the interval [start, end) lies inside the range
// [rs, re); an empty end means unbounded.
func InRange(start, end, rs, re string) bool {
	if start < rs {
		return false
	}
	if re == "" {
		return true
	}
	return end != "" && end <= re
}

// load64 reads the first 8 bytes of s, little-endian (the compiler turns
// it into one load).
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
