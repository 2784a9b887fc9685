package wire

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// Routing is part of the protocol so that clients can send each request
// straight to the node that leads its shard (saving the hop through another
// node). A path's namespace is its first Depth segments; the namespace's
// position in the key space is a 64-bit hash; ranges cut that space.

// RouteKey is the position of a namespace in the range key space: the
// big-endian 64-bit hash (FNV-1a, then the murmur3 finalizer) of the
// namespace path. Hashing spreads namespaces evenly over ranges, and a
// namespace is a single point, so its whole subtree lives in one range.
func RouteKey(ns string) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], routeHash(ns))
	return string(b[:])
}

func routeHash(ns string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(ns); i++ {
		h ^= uint64(ns[i])
		h *= 1099511628211
	}
	// FNV-1a alone leaves the high bits poorly mixed for names that differ
	// only at the end (job-1, job-2, ...); the finalizer fixes that.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Namespace returns the first depth segments of p (p itself when shallower).
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

// PathDepth returns the number of segments of a valid path ("/" has 0).
func PathDepth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// Span returns the key interval [start, end) a request on p touches: one
// point for paths at or below the namespace depth, everything ("", "") for
// shallower ones.
func Span(p string, depth int) (start, end string) {
	var b SpanBuf
	if _, end = SpanInto(p, depth, &b); end == "" {
		return "", ""
	}
	// One allocation for both: end is start and a zero byte.
	end = strings.Clone(end)
	return end[:8], end
}

// SpanBuf is room for the keys SpanInto returns.
type SpanBuf [9]byte

// SpanInto is Span without an allocation: the keys it returns are views of
// buf, valid while buf is neither changed nor reused, so a caller keeps
// them (or anything cut from them) only after strings.Clone. For the hot
// paths that only compare the keys (route lookups, range checks).
func SpanInto(p string, depth int, buf *SpanBuf) (start, end string) {
	if PathDepth(p) < depth {
		return "", ""
	}
	binary.BigEndian.PutUint64(buf[:8], routeHash(Namespace(p, depth)))
	buf[8] = 0
	end = unsafe.String(&buf[0], len(buf))
	return end[:8], end
}

// RouteTable is what OpRanges answers (Response.Table): the ranges and the
// client address of each shard's leader, as the answering node knows them.
type RouteTable struct {
	Gen     uint64
	Depth   int
	Ranges  []Range       // sorted by Start, tiling the key space
	Leaders []ShardLeader // by shard
}

// ShardLeader names the node that leads a shard.
type ShardLeader struct {
	_msgpack struct{} `msgpack:",as_array"`
	Shard    uint64
	Addr     string // client address of the leader's node ("" = unknown)
}

// Locate returns the shard owning path, or false when the path spans
// several ranges (or the table has no range for it).
func (t *RouteTable) Locate(path string) (uint64, bool) {
	var kb SpanBuf
	start, end := SpanInto(path, t.Depth, &kb)
	i := sort.Search(len(t.Ranges), func(i int) bool {
		r := t.Ranges[i]
		return r.End == "" || r.End > start
	})
	if i == len(t.Ranges) {
		return 0, false
	}
	r := t.Ranges[i]
	if start < r.Start || r.End != "" && (end == "" || end > r.End) {
		return 0, false
	}
	return r.Shard, true
}

// LeaderAddr returns the client address of a shard's leader ("" unknown).
func (t *RouteTable) LeaderAddr(shard uint64) string {
	for _, l := range t.Leaders {
		if l.Shard == shard {
			return l.Addr
		}
	}
	return ""
}

// EncodeMsgpack writes the table as [Gen, Depth, Ranges, Leaders].
func (t *RouteTable) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(4); err != nil {
		return err
	}
	if err := enc.EncodeUint(t.Gen); err != nil {
		return err
	}
	if err := enc.EncodeInt(int64(t.Depth)); err != nil {
		return err
	}
	if err := enc.Encode(t.Ranges); err != nil {
		return err
	}
	return enc.Encode(t.Leaders)
}

// DecodeMsgpack reads what EncodeMsgpack wrote, with bounded lists.
func (t *RouteTable) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 4 {
		return fmt.Errorf("route table has %d fields, want 4", n)
	}
	if t.Gen, err = dec.DecodeUint64(); err != nil {
		return err
	}
	if t.Depth, err = dec.DecodeInt(); err != nil {
		return err
	}
	if err := decodeList(dec, &t.Ranges); err != nil {
		return err
	}
	if err := decodeList(dec, &t.Leaders); err != nil {
		return err
	}
	for i := 4; i < n; i++ { // fields added later
		if err := dec.Skip(); err != nil {
			return err
		}
	}
	return nil
}
