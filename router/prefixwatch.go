package router

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// A prefix watch follows its subtree on every data shard at once: one leg
// per shard, each a feed subscription (local replica) or a forwarded watch
// (another node's), merged into the client's stream. A path's events come
// only from the shard owning its range at the time, so the legs together see
// every event of the subtree, across range moves, splits and merges, with
// nothing to hand over when a range changes hands. Each event carries its
// shard and revision; per shard the watch delivers in revision order, and
// the client's position is the last revision it saw of each shard.
//
// The first answer comes before any push: each leg holds the events it gets
// until every leg has answered, the answer's Position says where each shard
// starts (just before its first held event), and the held events follow it.
// A client that resumes from the position of any event it has seen so
// misses nothing and replays nothing, on every shard.
//
// A leg that ends (its replica removed, its peer connection lost, the
// client too slow) ends the whole stream with that code: the client resumes
// from its position, which resubscribes every leg exactly where it stopped.
// A range moving away ends no leg (feed.Follower).

type prefixWatch struct {
	c      *conn
	stream uint64
	path   string
	hide   bool // leave other clients' ids out of the events (hidesClients)
	// home is the shard holding the whole subtree (a prefix inside one
	// namespace), 0 when it spans ranges: the first answer's Rev is its
	// start, for clients that resume by revision.
	home uint64

	mu      sync.Mutex
	legs    []*leg
	waiting int                  // legs not yet answered
	first   func(*wire.Response) // the first answer; nil once sent
	holding bool                 // events wait in their legs' held until the first answer is out
	ended   bool
	failure *wire.Response // a leg's refusal before the first answer
}

// maxHeld bounds the events a prefix watch holds while its legs start; a
// watch whose replay and live events outgrow it ends as a consumer that
// fell behind, and the client resumes from the first answer's position.
const maxHeld = 1 << 16

// leg is one shard's part of a prefix watch.
type leg struct {
	w     *prefixWatch
	shard uint64
	rev   uint64 // the feed start revision: 0 = now, r = replay from r
	after uint64 // the last revision passed on (events up to it are dropped)
	local uint64 // feed subscription id on a local replica
	peer  *peer  // or: the forwarding connection and its stream id
	fwdID uint64
	// started: the leg's first answer came (answered ran).
	started bool
	held    []wire.Event // passed on once the first answer is out
}

// startsAfter is the revision the leg's part of the stream starts after:
// just before its first held event, or the last revision it passed on.
func (l *leg) startsAfter() uint64 {
	if len(l.held) > 0 {
		return l.held[0].Rev - 1
	}
	return l.after
}

// watchPrefix serves a client's prefix watch on every shard of the table.
func (c *conn) watchPrefix(req *wire.Request, done func(*wire.Response)) {
	t := c.s.cache.table()
	if t == nil {
		done(&wire.Response{Code: wire.Unavailable, Msg: "range table not loaded yet"})
		return
	}
	legs, err := startLegs(t, req)
	if err != nil {
		done(errorResponse(req.ID, err))
		return
	}
	pw := &prefixWatch{c: c, stream: req.ID, path: req.Path, hide: c.hidesClients(req.Path),
		legs: legs, waiting: len(legs), first: done, holding: true}
	if r, err := t.Locate(req.Path); err == nil {
		pw.home = r.Shard
	}
	for _, l := range legs {
		l.w = pw
	}
	c.mu.Lock()
	c.forgetWatch(pw.stream) // a client reusing a stream id replaces its watch
	c.watches[pw.stream] = &watch{prefix: pw}
	c.mu.Unlock()
	for _, l := range legs {
		l.subscribe()
	}
}

// startLegs plans one leg per data shard from the request's position.
// A shard the position names resumes after its revision; one it does not
// name replays from its first event. Without a
// position the legs start now, except that Rev (a start revision of one
// shard's numbering) applies to the shard holding the whole subtree.
func startLegs(t *placement.Table, req *wire.Request) ([]*leg, error) {
	pos := map[uint64]uint64{}
	for _, p := range req.Position {
		if _, dup := pos[p.Shard]; dup {
			return nil, wire.Errorf(wire.InvalidArgument, "the watch position names shard %d twice", p.Shard)
		}
		if p.Rev == math.MaxUint64 {
			return nil, wire.Errorf(wire.InvalidArgument, "the watch position's revision %d for shard %d is out of range", p.Rev, p.Shard)
		}
		pos[p.Shard] = p.Rev
	}
	revShard := uint64(0)
	if req.Rev != 0 && len(req.Position) == 0 {
		r, err := t.Locate(req.Path)
		if err != nil {
			return nil, wire.Errorf(wire.InvalidArgument,
				"a start revision numbers one shard's events, and the subtree of %s spans several: resume from a watch position", req.Path)
		}
		revShard = r.Shard
	}
	legs := make([]*leg, 0, len(t.Shards))
	for _, si := range t.Shards {
		l := &leg{shard: si.ID}
		switch rev, named := pos[si.ID]; {
		case named:
			l.rev, l.after = rev+1, rev
		case len(req.Position) > 0:
			l.rev = 1
		case si.ID == revShard:
			l.rev, l.after = req.Rev, req.Rev-1
		}
		legs = append(legs, l)
	}
	return legs, nil
}

// subscribe opens the leg on the local replica, or forwards it to a node
// holding one (the leader first) when there is none or the local replica
// cannot replay the leg's start revision.
func (l *leg) subscribe() {
	w := l.w
	if h := w.c.s.cfg.Host; h != nil {
		if local, ok := h.Replica(l.shard); ok && l.subscribeLocal(local) {
			return
		}
	}
	p := w.c.s.replicaPeer(l.shard)
	if p == nil {
		l.answered(&wire.Response{Code: wire.Unavailable, Msg: fmt.Sprintf("no reachable replica of shard %d for the watch", l.shard)}, 0)
		return
	}
	req := &wire.Request{Op: wire.OpWatch, Path: w.path, Flags: wire.FlagPrefix, Rev: l.rev, Shard: l.shard}
	// The peer's answer and its pushes share the stream: pushes carry
	// events, the answer none.
	id := p.send(req, func(r *wire.Response) {
		switch {
		case r.Code != wire.OK:
			l.end(r)
		case len(r.Events) > 0:
			l.deliver(r.Events)
		default:
			l.answered(nil, r.Rev)
		}
	})
	w.mu.Lock()
	l.peer, l.fwdID = p, id
	stopped := w.ended
	w.mu.Unlock()
	if stopped {
		p.unstream(id)
		p.send(&wire.Request{Op: wire.OpUnwatch, Stream: id, Shard: l.shard}, func(*wire.Response) {})
	}
}

// subscribeLocal opens the leg on the local replica; false when the
// replica refused a start revision the leader may still replay
// (askElsewhere).
func (l *leg) subscribeLocal(local Replica) bool {
	w := l.w
	id, last, err := local.Watch(w.path, true, l.rev, &legSub{l: l})
	if err != nil && askElsewhere(err, false, local) {
		return false
	}
	if err != nil {
		l.answered(legRefusal(l.shard, replayRefusal(err, local)), 0)
		return true
	}
	w.mu.Lock()
	l.local = id
	stopped := w.ended
	w.mu.Unlock()
	if stopped {
		local.Unwatch(id)
	}
	l.answered(nil, last)
	return true
}

// replicaPeer is a connection to a node holding a replica of the shard:
// its leader's when it answers, else the first other replica's that does
// (any replica serves a watch). nil: none answers.
func (s *Server) replicaPeer(shardID uint64) *peer {
	var addrs []string
	if addr, _ := s.cache.leaderAddr(shardID); addr != "" {
		addrs = append(addrs, addr)
	}
	if t := s.cache.table(); t != nil {
		if si, ok := t.Shard(shardID); ok {
			for _, id := range si.Replicas {
				if n, ok := t.Node(id); ok && n.ClientAddr != "" && !slices.Contains(addrs, n.ClientAddr) {
					addrs = append(addrs, n.ClientAddr)
				}
			}
		}
	}
	for _, addr := range addrs {
		if p, err := s.peers.get(addr); err == nil {
			return p
		}
	}
	return nil
}

// legRefusal is a feed's refusal as an answer naming the leg's shard.
func legRefusal(shard uint64, err error) *wire.Response {
	var ce *wire.CompactedError
	if errors.As(err, &ce) {
		ce.Shard = shard
		r := ce.Response(0)
		r.Msg = fmt.Sprintf("shard %d: %s", shard, r.Msg)
		return r
	}
	r := errorResponse(0, err)
	r.Msg = fmt.Sprintf("shard %d: %s", shard, r.Msg)
	return r
}

// answered records a leg's first answer (refusal nil: it runs, its feed
// starting after revision last). Once every leg has answered, the client
// gets OK with the position the stream starts after, or the first refusal.
func (l *leg) answered(refusal *wire.Response, last uint64) {
	w := l.w
	w.mu.Lock()
	if l.started {
		w.mu.Unlock()
		return
	}
	l.started = true
	if refusal != nil && w.failure == nil {
		w.failure = refusal
	}
	if refusal == nil {
		l.after = max(l.after, last)
	}
	w.waiting--
	if w.waiting > 0 || w.first == nil {
		w.mu.Unlock()
		return
	}
	done := w.first
	w.first = nil
	resp := w.failure
	if resp == nil {
		resp = &wire.Response{Stream: w.stream, Position: make([]wire.ShardRev, len(w.legs))}
		for i, l := range w.legs {
			resp.Position[i] = wire.ShardRev{Shard: l.shard, Rev: l.startsAfter()}
			if l.shard == w.home {
				resp.Rev = l.startsAfter()
			}
		}
	}
	failed := resp.Code != wire.OK
	w.ended = w.ended || failed
	w.mu.Unlock()
	if failed {
		w.c.mu.Lock()
		if cur := w.c.watches[w.stream]; cur != nil && cur.prefix == w {
			delete(w.c.watches, w.stream) // admitWatch gives its count back for a refusal
		}
		w.c.mu.Unlock()
		go w.stopLegs()
	}
	done(resp)
	if !failed {
		w.release()
	}
}

// release passes on the events the legs held while the stream started, and
// from then on each event as it comes. Events that arrive meanwhile join
// the held ones, so the stream keeps each shard's order.
func (w *prefixWatch) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holding = false
	for _, l := range w.legs {
		held := l.held
		l.held = nil
		if len(held) > 0 && !w.ended && !w.pushLocked(held) {
			break
		}
	}
}

// deliver passes a leg's events on to the client, dropping any it has
// already passed on (a lagging replica may repeat what the position
// covers). false: the stream ended.
func (l *leg) deliver(events []wire.Event) bool {
	w := l.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return false
	}
	// A leg's events come in revision order: only a replay that overlaps
	// what was passed on starts at or below l.after. The frame is encoded
	// before send returns, so the feed's slice is not kept.
	out := events
	for len(out) > 0 && out[0].Rev <= l.after {
		out = out[1:]
	}
	if len(out) == 0 {
		return true
	}
	l.after = out[len(out)-1].Rev
	if w.holding {
		held := len(out)
		for _, o := range w.legs {
			held += len(o.held)
		}
		if held > maxHeld {
			w.c.s.slowConsumer()
			w.endLocked(&wire.Response{Code: wire.TooMany, Msg: fmt.Sprintf("the watch gathered over %d events before it started; resume from a later position", maxHeld)})
			return false
		}
		l.held = append(l.held, out...) // copied: the feed's slice is not kept
		return true
	}
	return w.pushLocked(out)
}

// pushLocked sends one shard's events to the client (w.mu held). false:
// the client is too slow, and the stream ended.
func (w *prefixWatch) pushLocked(out []wire.Event) bool {
	if w.hide {
		out = w.c.hideEventClients(out)
	}
	if w.c.send(&wire.Response{Stream: w.stream, Events: out}) {
		return true
	}
	w.c.s.slowConsumer()
	w.endLocked(&wire.Response{Code: wire.TooMany, Msg: "watch consumer too slow; resume from the last position seen"})
	return false
}

// end ends the stream with a leg's ending push, or refuses it when the
// leg had not started.
func (l *leg) end(r *wire.Response) {
	w := l.w
	w.mu.Lock()
	if !l.started {
		w.mu.Unlock()
		resp := *r
		resp.Msg = fmt.Sprintf("shard %d: %s", l.shard, r.Msg)
		l.answered(&resp, 0)
		return
	}
	msg := fmt.Sprintf("shard %d: %s; resume from the last position seen", l.shard, r.Msg)
	w.endLocked(&wire.Response{Code: r.Code, Msg: msg, Position: r.Position})
	w.mu.Unlock()
}

// endLocked ends the stream with a push saying why (w.mu held); before
// the first answer, the reason becomes the refusal. The legs are stopped
// apart, never under a feed's lock.
func (w *prefixWatch) endLocked(r *wire.Response) {
	if w.ended {
		return
	}
	w.ended = true
	if w.first != nil {
		if w.failure == nil {
			w.failure = r
		}
		return
	}
	c := w.c
	c.mu.Lock()
	if cur := c.watches[w.stream]; cur != nil && cur.prefix == w {
		c.forgetWatch(w.stream)
	}
	c.mu.Unlock()
	r.Stream = w.stream
	c.send(r)
	go w.stopLegs()
}

// stop ends the stream without a push (unwatch, connection closed).
func (w *prefixWatch) stop() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
	w.stopLegs()
}

// stopLegs unsubscribes every leg. It takes feed locks, so it never runs
// under w.mu or inside a feed's delivery.
func (w *prefixWatch) stopLegs() {
	w.mu.Lock()
	legs := append([]*leg(nil), w.legs...)
	w.mu.Unlock()
	for _, l := range legs {
		w.mu.Lock()
		local, p, fwdID := l.local, l.peer, l.fwdID
		w.mu.Unlock()
		switch {
		case p != nil && fwdID != 0:
			p.unstream(fwdID)
			p.send(&wire.Request{Op: wire.OpUnwatch, Stream: fwdID, Shard: l.shard}, func(*wire.Response) {})
		case local != 0:
			if h := w.c.s.cfg.Host; h != nil {
				if s, ok := h.Replica(l.shard); ok {
					s.Unwatch(local)
				}
			}
		}
	}
}

// legSub receives a local leg's events from its shard's feed.
type legSub struct{ l *leg }

// Send implements feed.Subscriber.
func (s *legSub) Send(events []wire.Event) bool { return s.l.deliver(events) }

// FollowsMoves implements feed.Follower: a range moving away ends nothing,
// its events go on at the destination, which the watch also follows.
func (s *legSub) FollowsMoves() bool { return true }

// End implements feed.Ender: the replica was removed.
func (s *legSub) End(code wire.Code, msg string) {
	s.l.end(&wire.Response{Code: code, Msg: msg})
}
