// Package feed is a shard's watch feed: the ring of its most recent
// applied events and the watch subscriptions they fan out to.
package feed

import (
	"fmt"
	"strings"
	"sync"

	"github.com/wardenlock/warden/wire"
)

// The feed keeps the most recent events of a shard in a ring, in revision
// order, and fans new ones out to watch subscriptions. A watch may start from
// any revision still in the ring; older ones answer Compacted. Delivery never
// blocks the apply path: a subscriber whose queue is full is dropped with
// an error it can resume from (slow consumer).

// Subscriber receives events; Send must not block, and must not keep the
// slice after it returns (the feed reuses it; the events themselves may be
// copied). It returns false when the subscriber can take no more (it is
// then removed).
type Subscriber interface {
	Send(events []wire.Event) bool
}

// internal is implemented by the node's own subscribers (the metrics'
// event tally, the router's hold notices); Watchers counts clients' watches
// only.
type internal interface{ Internal() bool }

type subscription struct {
	path   string
	prefix bool
	sub    Subscriber
}

// all reports whether every event matches (a watch of "/").
func (s *subscription) all() bool { return s.prefix && s.path == "/" }

func (s *subscription) matches(ev *wire.Event) bool {
	if !s.prefix {
		return ev.Path == s.path
	}
	if s.all() {
		return true
	}
	return ev.Path == s.path || strings.HasPrefix(ev.Path, s.path) && ev.Path[len(s.path)] == '/'
}

// History reads a shard's older events from the node's audit store: those
// with revisions from..to, in order (see audit.Store.History).
type History func(from, to uint64, limit int) ([]wire.Event, error)

// maxReplay bounds the events one watch may replay from history.
const maxReplay = 100000

type Feed struct {
	History  History // nil: only the ring
	mu       sync.Mutex
	max      int // events the ring may hold
	maxBytes int // memory the ring may use: its slots plus the bytes its events hold
	ring     []slot
	start    int    // index of the oldest event in ring
	n        int    // events in ring
	bytes    int    // string and value bytes held by the events in ring
	last     uint64 // revision of the newest event seen
	nextID   uint64
	subs     map[uint64]*subscription
	arena    eventArena
	fresh    []wire.Event // the events of one append, copied (reused)
	matched  []wire.Event // the part of fresh one subscriber matches (reused)
}

// newFeed makes a feed retaining up to capacity events and maxBytes of
// memory (slots plus the bytes of their paths, owners and values). The ring
// starts small and grows as events arrive, so idle shards cost little.
func New(capacity, maxBytes int) *Feed {
	return &Feed{max: capacity, maxBytes: maxBytes, ring: make([]slot, min(capacity, 64)), subs: make(map[uint64]*subscription)}
}

// grow doubles the ring (up to max and within maxBytes), keeping events in
// order.
func (f *Feed) grow() bool {
	size := min(2*len(f.ring), f.max)
	if size <= len(f.ring) || size*eventSize+f.bytes > f.maxBytes {
		return false
	}
	next := make([]slot, size)
	for i := 0; i < f.n; i++ {
		next[i] = f.ring[(f.start+i)%len(f.ring)]
	}
	f.ring, f.start = next, 0
	return true
}

// dropOldest forgets the oldest event, and the arena chunks only it used.
func (f *Feed) dropOldest() {
	old := &f.ring[f.start]
	f.bytes -= slotBytes(old)
	f.start = (f.start + 1) % len(f.ring)
	f.n--
	var next *slot
	if f.n > 0 {
		next = &f.ring[f.start]
	}
	f.arena.drop(old, next)
}

// append records events and delivers them to matching watches. The events
// are copied, with their strings and values in the feed's own arena: events
// is reused by the state machine, and its strings point into whole decoded
// Raft entries that the ring must not keep alive.
func (f *Feed) Append(events []wire.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fresh = f.fresh[:0]
	for i := range events {
		sl, ev := f.arena.keep(events[i])
		f.fresh = append(f.fresh, ev)
		if f.n == len(f.ring) && !f.grow() {
			f.dropOldest()
		}
		f.ring[(f.start+f.n)%len(f.ring)] = sl
		f.n++
		f.bytes += slotBytes(&sl)
		for f.n > 1 && len(f.ring)*eventSize+f.bytes > f.maxBytes {
			f.dropOldest()
		}
		f.last = ev.Rev
	}
	if len(f.subs) == 0 {
		return
	}
	for id, s := range f.subs {
		out := f.fresh
		if !s.all() {
			f.matched = f.matched[:0]
			for i := range f.fresh {
				if s.matches(&f.fresh[i]) {
					f.matched = append(f.matched, f.fresh[i])
				}
			}
			out = f.matched
		}
		if len(out) > 0 && !s.sub.Send(out) {
			delete(f.subs, id)
		}
	}
}

func (f *Feed) at(i int) wire.Event { return f.arena.event(&f.ring[(f.start+i)%len(f.ring)]) }

// revAt is the revision of the i-th retained event.
func (f *Feed) revAt(i int) uint64 { return f.ring[(f.start+i)%len(f.ring)].rev }

// subscribe replays retained events from rev (0 = from now) and registers the
// subscriber for new ones, atomically, so nothing falls in between. It
// returns the subscription id and the revision the watch starts after. A
// start revision this replica cannot replay without a gap is refused with
// a *GapError: the router asks another replica, and the shard leader's
// refusal is the client's Compacted.
func (f *Feed) Subscribe(path string, prefix bool, rev uint64, sub Subscriber) (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &subscription{path: path, prefix: prefix, sub: sub}
	if rev != 0 && f.History != nil && (f.n == 0 || rev < f.revAt(0)) && rev <= f.last {
		last, err := f.replayHistory(s, rev)
		if err != nil {
			return 0, f.last, err
		}
		f.nextID++
		f.subs[f.nextID] = s
		return f.nextID, last, nil
	}
	if rev != 0 && rev <= f.last {
		oldest := f.last + 1
		if f.n > 0 {
			oldest = f.revAt(0)
		}
		if rev < oldest {
			return 0, f.last, gap(rev, oldest, "this node no longer retains it")
		}
		var out []wire.Event
		for i := 0; i < f.n; i++ {
			ev := f.at(i)
			if ev.Rev >= rev && s.matches(&ev) {
				out = append(out, ev)
			}
		}
		if len(out) > 0 && !sub.Send(out) {
			return 0, f.last, wire.Errorf(wire.TooMany, "watch backlog exceeds the subscriber's queue")
		}
	}
	f.nextID++
	f.subs[f.nextID] = s
	return f.nextID, f.last, nil
}

// replayHistory sends a new subscriber the events from rev that the ring no
// longer (or, after a restart, not yet) holds, read from the audit store,
// then the ring's. The history must run without a gap from rev into the
// ring, or to the last revision when the ring is empty: a replica that
// caught up from a snapshot never applied, so never recorded, the events
// the snapshot covers. Called with f.mu held, so no event is applied in
// between.
func (f *Feed) replayHistory(s *subscription, rev uint64) (uint64, error) {
	to := f.last
	if f.n > 0 {
		to = f.revAt(0) - 1
	}
	evs, err := f.History(rev, to, maxReplay)
	if err != nil {
		return 0, err
	}
	next := rev
	for _, ev := range evs {
		if ev.Rev != next {
			oldest := ev.Rev
			if next != rev {
				oldest = to + 1 // a hole in the middle: only the ring (or what follows) is whole
			}
			return 0, gap(next, oldest, "this node's history has a gap there")
		}
		next++
	}
	if next-1 != to {
		detail := "this node's history does not reach it without a gap"
		if len(evs) == maxReplay {
			detail = fmt.Sprintf("more than %d events to replay", maxReplay)
		}
		return 0, gap(rev, to+1, detail)
	}
	var out []wire.Event
	for i := range evs {
		if s.matches(&evs[i]) {
			out = append(out, evs[i])
		}
	}
	for i := 0; i < f.n; i++ {
		if ev := f.at(i); s.matches(&ev) {
			out = append(out, ev)
		}
	}
	if len(out) > 0 && !s.sub.Send(out) {
		return 0, wire.Errorf(wire.TooMany, "watch backlog exceeds the subscriber's queue")
	}
	return f.last, nil
}

// GapError refuses a watch's start revision that this replica cannot
// replay without a gap: it no longer retains it, or never had it (it
// caught up from a snapshot). Oldest is the revision it can replay from.
// The router asks the shard's leader instead; only the leader's refusal
// reaches the client, as Compacted.
type GapError struct {
	Shard       uint64 // set by the shard (Shard.Watch)
	Rev, Oldest uint64
	Detail      string
}

func (e *GapError) Error() string {
	return fmt.Sprintf("feed: revision %d cannot be replayed here (from %d on only): %s", e.Rev, e.Oldest, e.Detail)
}

// Unwrap makes a GapError that reaches a client a Compacted.
func (e *GapError) Unwrap() error {
	return &wire.CompactedError{Shard: e.Shard, Oldest: e.Oldest,
		Detail: fmt.Sprintf("revision %d is no longer retained (%s; oldest is %d)", e.Rev, e.Detail, e.Oldest)}
}

func gap(rev, oldest uint64, detail string) *GapError {
	return &GapError{Rev: rev, Oldest: oldest, Detail: detail}
}

// Skip records that the local replica's state jumped to revision rev
// without applying the entries in between: it recovered from a snapshot
// (the leader's, having fallen behind its compacted log). The ring is
// emptied and every client's subscription ends with Unavailable: it watches
// again from its last revision, which the history no longer holds here
// either (GapError), so the router serves it from another replica.
func (f *Feed) Skip(rev uint64) {
	f.mu.Lock()
	if rev <= f.last {
		f.mu.Unlock()
		return
	}
	skipped := f.last + 1
	for f.n > 0 {
		f.dropOldest()
	}
	f.last = rev
	var ended []*subscription
	for id, s := range f.subs {
		if in, ok := s.sub.(internal); ok && in.Internal() {
			continue // the node's own (the event tally, the hold notices, which keepalive answers repeat) carry on
		}
		delete(f.subs, id)
		ended = append(ended, s)
	}
	f.mu.Unlock()
	for _, s := range ended {
		if e, ok := s.sub.(Ender); ok {
			e.End(wire.Unavailable, fmt.Sprintf("this node's replica caught up from a snapshot, skipping revisions %d to %d; watch again from your last revision", skipped, rev))
		}
	}
}

// Follower is a Subscriber that stays subscribed when the range holding its
// path moves away: it follows the path on every shard (a prefix watch's part
// on this shard), so the destination's events reach it without a hand-over.
type Follower interface {
	FollowsMoves() bool
}

// endRange ends the watches whose path lies in the key range [start, end)
// at the given namespace depth: the range moved to another shard.
func (f *Feed) EndRange(start, end string, depth int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, s := range f.subs {
		k, _ := wire.Span(s.path, depth)
		if wire.PathDepth(s.path) < depth || k < start || (end != "" && k >= end) {
			continue
		}
		if fl, ok := s.sub.(Follower); ok && fl.FollowsMoves() {
			continue
		}
		delete(f.subs, id)
		if e, ok := s.sub.(Ender); ok {
			e.End(wire.RangeMoving, fmt.Sprintf("the range holding %s moved to another shard; watch again from revision %d", s.path, f.last+1))
		}
	}
}

func (f *Feed) Unsubscribe(id uint64) {
	f.mu.Lock()
	delete(f.subs, id)
	f.mu.Unlock()
}

// Watchers returns the number of clients' subscriptions (the node's own,
// marked Internal, are not counted).
func (f *Feed) Watchers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.subs {
		if in, ok := s.sub.(internal); !ok || !in.Internal() {
			n++
		}
	}
	return n
}

// Ender is a Subscriber that can be told its watch ended (the local replica
// it watched was removed, or its range moved to another shard); it should
// pass code and msg to its client, who resumes the watch elsewhere from its
// last revision. End must not block.
type Ender interface {
	End(code wire.Code, msg string)
}

// endAll ends every watch on the feed.
func (f *Feed) EndAll(code wire.Code, msg string) {
	f.mu.Lock()
	subs := f.subs
	f.subs = map[uint64]*subscription{}
	f.mu.Unlock()
	for _, s := range subs {
		if e, ok := s.sub.(Ender); ok {
			e.End(code, msg)
		}
	}
}
