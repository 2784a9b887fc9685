package router

import (
	"errors"

	"github.com/wardenlock/warden/feed"
	"github.com/wardenlock/warden/wire"
)

// connSub delivers a local shard's events to a client connection.
type connSub struct {
	c      *conn
	stream uint64
	hide   bool // leave other clients' ids out of the events (hidesClients)
	// notices: only the events that tell a holder its hold ended (a peer's
	// hold-notice subscription, FlagHoldNotices).
	notices bool
	// follows: one shard's part of another node's prefix watch, which
	// follows the prefix on every shard and so outlives range moves.
	follows bool
}

// FollowsMoves implements feed.Follower.
func (cs *connSub) FollowsMoves() bool { return cs.follows }

// Send implements feed.Subscriber. When the client cannot keep up the
// watch ends with TooMany; the client resumes from its last revision.
func (cs *connSub) Send(events []wire.Event) bool {
	if cs.notices {
		var keep []wire.Event
		for i := range events {
			if events[i].TellsHolder() {
				keep = append(keep, events[i])
			}
		}
		if len(keep) == 0 {
			return true
		}
		events = keep
	}
	if cs.hide {
		events = cs.c.hideEventClients(events)
	}
	if cs.c.send(&wire.Response{Stream: cs.stream, Events: events}) {
		return true
	}
	cs.c.s.slowConsumer()
	cs.c.mu.Lock()
	cs.c.forgetWatch(cs.stream)
	cs.c.mu.Unlock()
	cs.c.send(&wire.Response{Stream: cs.stream, Code: wire.TooMany,
		Msg: "watch consumer too slow; resume from the last revision seen"})
	return false
}

// End implements feed.Ender: the watched range moved to another shard
// (RangeMoving), or the local replica it read from was removed (Closed).
// Both are retryable: the client resumes from its last revision.
func (cs *connSub) End(code wire.Code, msg string) {
	cs.c.mu.Lock()
	cs.c.forgetWatch(cs.stream)
	cs.c.mu.Unlock()
	cs.c.send(&wire.Response{Stream: cs.stream, Code: code, Msg: msg})
}

// watch starts a stream whose id is the request id. The first answer is OK
// with the revision the watch starts after; events follow as pushes.
func (c *conn) watch(req *wire.Request, done func(*wire.Response)) {
	if req.Has(wire.FlagPrefix) && !(c.peer && req.Shard != 0) {
		c.watchPrefix(req, done) // prefixwatch.go
		return
	}
	stream := req.ID
	shardID := req.Shard
	if !c.peer || shardID == 0 {
		t := c.s.cache.table()
		if t == nil {
			done(&wire.Response{Code: wire.Unavailable, Msg: "range table not loaded yet"})
			return
		}
		r, err := t.Locate(req.Path)
		if err != nil {
			done(errorResponse(req.ID, err))
			return
		}
		shardID = r.Shard
	}
	if h := c.s.cfg.Host; h != nil {
		if local, ok := h.Replica(shardID); ok {
			sub := &connSub{c: c, stream: stream, hide: c.hidesClients(req.Path),
				notices: c.peer && req.Has(wire.FlagHoldNotices)}
			sub.follows = c.peer && req.Shard != 0 && req.Has(wire.FlagPrefix) && !sub.notices
			id, rev, err := local.Watch(req.Path, req.Has(wire.FlagPrefix), req.Rev, sub)
			if err != nil && askElsewhere(err, c.peer, local) {
				c.forwardWatch(req, shardID, stream, done)
				return
			}
			if err != nil {
				done(errorResponse(req.ID, replayRefusal(err, local)))
				return
			}
			c.mu.Lock()
			c.forgetWatch(stream) // a client reusing a stream id replaces its watch
			c.watches[stream] = &watch{shard: shardID, local: id}
			c.mu.Unlock()
			done(&wire.Response{Stream: stream, Rev: rev})
			return
		}
	}
	c.forwardWatch(req, shardID, stream, done)
}

// askElsewhere says whether a watch the local replica refused (err) goes
// to the shard's leader instead: the replica cannot replay its start
// revision (it caught up from a snapshot, or no longer retains it), the
// request came from a client (a peer's request already is that second
// try) and the local replica does not lead.
func askElsewhere(err error, fromPeer bool, local Replica) bool {
	var ge *feed.GapError
	return errors.As(err, &ge) && !fromPeer && !local.IsLeader()
}

// replayRefusal is the answer to a start revision the local replica cannot
// replay, when it is not asked elsewhere: Compacted only from the shard's
// leader; from another replica (no leader known to forward to) Unavailable,
// so the client watches again and reaches the leader.
func replayRefusal(err error, local Replica) error {
	var ge *feed.GapError
	if errors.As(err, &ge) && !local.IsLeader() {
		return wire.Errorf(wire.Unavailable, "shard %d: this replica cannot replay revision %d and does not lead; watch again", ge.Shard, ge.Rev)
	}
	return err
}

func (c *conn) forwardWatch(req *wire.Request, shardID, stream uint64, done func(*wire.Response)) {
	addr, _ := c.s.cache.leaderAddr(shardID)
	if addr == "" {
		addr = c.s.cache.anyReplicaAddr(shardID)
	}
	p, err := c.s.peers.get(addr)
	if addr == "" || err != nil {
		done(&wire.Response{Code: wire.Unavailable, Msg: "no reachable replica for the watch"})
		return
	}
	fwd := *req
	fwd.Shard = shardID
	first, hide := true, c.hidesClients(req.Path)
	w := &watch{shard: shardID, peer: p}
	fwdID := p.send(&fwd, func(r *wire.Response) {
		r.Stream = stream
		if first {
			first = false
			if r.Code == wire.OK {
				c.mu.Lock()
				c.forgetWatch(stream)
				c.watches[stream] = w
				c.mu.Unlock()
			}
			done(r)
			return
		}
		if r.Code != wire.OK {
			c.mu.Lock()
			c.forgetWatch(stream)
			c.mu.Unlock()
		}
		if hide && len(r.Events) > 0 {
			r.Events = c.hideEventClients(r.Events)
		}
		c.send(r)
	})
	w.fwdID = fwdID
}

func (c *conn) unwatch(req *wire.Request, done func(*wire.Response)) {
	c.mu.Lock()
	w := c.forgetWatch(req.Stream)
	c.mu.Unlock()
	if w == nil {
		done(&wire.Response{Code: wire.NotFound, Msg: "no such watch stream"})
		return
	}
	c.endWatch(w)
	done(&wire.Response{Stream: 0})
}

// forgetWatch removes stream from the connection's watches (c.mu held) and
// gives it back to the identity's count; nil when it was not there.
func (c *conn) forgetWatch(stream uint64) *watch {
	w := c.watches[stream]
	if w != nil {
		delete(c.watches, stream)
		c.sec.unwatched(1)
	}
	return w
}

func (c *conn) endWatch(w *watch) {
	if w.prefix != nil {
		w.prefix.stop()
		return
	}
	if w.peer != nil {
		w.peer.unstream(w.fwdID)
		w.peer.send(&wire.Request{Op: wire.OpUnwatch, Stream: w.fwdID, Shard: w.shard}, func(*wire.Response) {})
		return
	}
	if h := c.s.cfg.Host; h != nil {
		if local, ok := h.Replica(w.shard); ok {
			local.Unwatch(w.local)
		}
	}
}
