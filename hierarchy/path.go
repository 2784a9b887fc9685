package hierarchy

import (
	"encoding/binary"
	"strings"

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
// with no empty, "." or ".." segment, no control characters, and within the
// limits. The error is a *wire.Error with code InvalidArgument that says what
// is wrong.
func Validate(p string, lim Limits) error {
	lim = lim.withDefaults()
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
func Namespace(p string, depth int) string {
	if p == "/" || depth <= 0 {
		return "/"
	}
	n := 0
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			n++
			if n == depth {
				return p[:i]
			}
		}
	}
	return p
}

// RouteKey is the position of a namespace in the range key space: the
// big-endian 64-bit hash (FNV-1a, then mixed) of the namespace path. Hashing spreads
// namespaces evenly over ranges (and so over shards) with no operator-chosen
// split points, and a namespace is a single point, so its whole subtree always
// lives in one range: every hierarchical conflict is decided inside one shard.
func RouteKey(ns string) string {
	h := uint64(14695981039346656037)
	for i := 0; i < len(ns); i++ {
		h ^= uint64(ns[i])
		h *= 1099511628211
	}
	// FNV-1a alone leaves the high bits poorly mixed for names that differ
	// only at the end (job-1, job-2, ...); the murmur3 finalizer fixes that.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], h)
	return string(b[:])
}

// Span returns the key interval [start, end) that a request on p touches when
// ranges are cut at the given namespace depth. A path at or below the
// namespace depth touches one point (its namespace's RouteKey); a shallower
// path covers namespaces spread over the whole key space, so it spans
// everything ("", ""), which only a single all-covering range owns.
func Span(p string, depth int) (start, end string) {
	if Depth(p) < depth {
		return "", ""
	}
	k := RouteKey(Namespace(p, depth))
	return k, k + "\x00"
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
