package feed

import (
	"unsafe"

	"github.com/wardenlock/warden/wire"
)

// The ring holds no pointers. A wire.Event has three (path, owner, value),
// so a ring of them is memory the collector scans on every cycle: at 16
// shards a node's rings hold ≈ 400k events, 64 MB: collections cost 33–40
// ms of CPU each and the live heap was 163–191 MB per node, against 17 ms
// and 89 MB with this ring and dragonboat's smaller log slices
// (inmemlog.go). A slot
// keeps its strings as spans of the feed's arena chunks instead, and an
// event is rebuilt from it when a watch replays the ring. The chunks stay
// listed in the arena, in order, until no slot uses them.

// span locates bytes in the arena: in the chunk with that sequence
// number, or (large) the large string with that sequence number.
type span struct {
	chunk, off, n uint32
	large         bool
}

// slot is one retained event, without pointers.
type slot struct {
	rev, token, lease, version, client, seq, shard uint64
	time, ttl                                      int64
	path, owner, value                             span
	first                                          uint32 // the oldest chunk this slot's spans may use
	kind                                           wire.EventKind
	cause                                          wire.Cause
	mode                                           wire.Mode
	noValue                                        bool // Value was nil (not empty)
}

// eventSize is what one ring slot costs.
const eventSize = int(unsafe.Sizeof(slot{}))

// eventArena holds the strings and values of the feed's events in shared
// chunks, so an event costs no allocation of its own and pins nothing else.
// Bytes written are never changed: a chunk is dropped, not reused, when no
// slot uses it, and lives on as long as any event handed to a watch does.
// Strings over arenaChunk/8 are copied alone and listed apart, so they
// neither waste a chunk's room nor outlive their event in the list.
type eventArena struct {
	chunks    [][]byte // chunks[i] has sequence number base+i; the last is being filled
	base      uint32
	large     [][]byte // large[i] has sequence number largeBase+i, in event order
	largeBase uint32
}

const arenaChunk = 64 << 10

func (a *eventArena) alloc(b []byte) (span, []byte) {
	if len(b) > arenaChunk/8 {
		a.large = append(a.large, append(make([]byte, 0, len(b)), b...))
		return span{chunk: a.largeBase + uint32(len(a.large)) - 1, n: uint32(len(b)), large: true}, a.large[len(a.large)-1]
	}
	if len(a.chunks) == 0 || cap(a.chunks[len(a.chunks)-1])-len(a.chunks[len(a.chunks)-1]) < len(b) {
		a.chunks = append(a.chunks, make([]byte, 0, arenaChunk))
	}
	c := &a.chunks[len(a.chunks)-1]
	off := len(*c)
	*c = append(*c, b...)
	return span{chunk: a.base + uint32(len(a.chunks)) - 1, off: uint32(off), n: uint32(len(b))}, (*c)[off:len(*c):len(*c)]
}

// floor is the oldest chunk a slot made now may use.
func (a *eventArena) floor() uint32 { return a.base + uint32(max(len(a.chunks), 1)) - 1 }

// drop forgets what only the oldest slot s used: its large strings, and
// the chunks before next's floor (next: the slot now oldest, if any).
func (a *eventArena) drop(s, next *slot) {
	for _, sp := range [...]span{s.path, s.owner, s.value} {
		if sp.large {
			a.large[0] = nil
			a.large = a.large[1:]
			a.largeBase++
		}
	}
	if next == nil {
		return
	}
	for len(a.chunks) > 1 && int32(next.first-a.base) > 0 {
		a.chunks[0] = nil
		a.chunks = a.chunks[1:]
		a.base++
	}
}

func (a *eventArena) bytesOf(s span) []byte {
	if s.large {
		return a.large[s.chunk-a.largeBase]
	}
	c := a.chunks[s.chunk-a.base]
	return c[s.off : s.off+s.n : s.off+s.n]
}

func (a *eventArena) stringOf(s span) string {
	if s.n == 0 {
		return ""
	}
	b := a.bytesOf(s)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// keep copies ev's strings and value into the arena: the slot to retain
// and the event to hand to watches now, both on the arena's bytes.
func (a *eventArena) keep(ev wire.Event) (slot, wire.Event) {
	s := slot{rev: ev.Rev, token: ev.Token, lease: ev.Lease, version: ev.Version, client: ev.Client,
		seq: ev.Seq, shard: ev.Shard, time: ev.Time, ttl: ev.TTL, kind: ev.Kind, cause: ev.Cause,
		mode: ev.Mode, noValue: ev.Value == nil, first: a.floor()}
	var b []byte
	if ev.Path != "" {
		s.path, b = a.alloc(unsafe.Slice(unsafe.StringData(ev.Path), len(ev.Path))) // only read
		ev.Path = unsafe.String(unsafe.SliceData(b), len(b))
	}
	if ev.Owner != "" {
		s.owner, b = a.alloc(unsafe.Slice(unsafe.StringData(ev.Owner), len(ev.Owner)))
		ev.Owner = unsafe.String(unsafe.SliceData(b), len(b))
	}
	switch {
	case len(ev.Value) > 0:
		s.value, ev.Value = a.alloc(ev.Value)
	case ev.Value != nil:
		ev.Value = []byte{}
	}
	return s, ev
}

// event rebuilds the event s retains.
func (a *eventArena) event(s *slot) wire.Event {
	ev := wire.Event{Rev: s.rev, Kind: s.kind, Cause: s.cause, Path: a.stringOf(s.path), Mode: s.mode,
		Token: s.token, Lease: s.lease, Owner: a.stringOf(s.owner), Version: s.version, Client: s.client,
		Seq: s.seq, Shard: s.shard, Time: s.time, TTL: s.ttl}
	switch {
	case s.value.n > 0:
		ev.Value = a.bytesOf(s.value)
	case !s.noValue:
		ev.Value = []byte{}
	}
	return ev
}

func slotBytes(s *slot) int { return int(s.path.n + s.owner.n + s.value.n) }
