package router

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Hold notices. A client opens its connection's hold stream (OpHolds); from
// then on, every session lease whose keepalive the connection carries and
// the service acknowledges (not gone, not bound to another identity) is
// registered on it, and the router pushes on the stream the events that end
// one of that lease's holds without the holder's doing, or end the lease
// itself (wire.Event.TellsHolder): a revocation at its deadline, an admin's
// resign, release or hand-over, an expiry. The events come from the local
// replicas' feeds, which apply every entry of their shard whichever node
// leads it, so a leader change loses nothing; for a shard this router holds
// no replica of (a standalone router holds none) from a subscription
// forwarded to a node that has one, which sends only these events
// (FlagHoldNotices: a few per revocation, nothing per lock cycle). What a
// push misses (a broken connection, a subscription being renewed) the
// keepalive answers carry (lease/lost.go): the holder hears within one
// keepalive interval at worst.
//
// A lock acquired without a session (a single-lock lease) is registered on
// the connection that the grant, or a later renewal, is answered on, by its
// path and token, until its end is told or its holder's release is answered
// there. A push it misses, its holder learns at its next renew (NotHolder).
//
// Only the leases a connection's own acknowledged keepalives name, and the
// single-lock grants and renewals answered on it, are registered on it;
// keepalives and renewals are checked against the connection's identity by
// every shard, so no connection hears of another identity's holds.

// holdHub is the router's registry of hold streams and its feed
// subscriptions.
type holdHub struct {
	s  *Server
	mu sync.Mutex
	// byLease: the connections each session lease or single-lock lock is
	// registered on, with when a keepalive or renewal last renewed it
	// there. A registration ends with its connection, with its lease's end,
	// or after holdIdle without a keepalive (a session that never touched a
	// shard ends without an event).
	byLease map[holdKey]map[*conn]time.Time
	subs    map[uint64]*holdSub // shard id -> the subscription that feeds the hub
	resume  map[uint64]uint64   // shard id -> the revision a renewed subscription replays from
	running bool
	swept   time.Time
	// incomplete: some shard has no live subscription yet; a registration
	// then kicks the follower, so a new client's notices are not left to
	// its keepalives.
	incomplete bool
	kick       chan struct{}
}

// holdKey names what a registration follows: a session lease (every hold
// it has), or the one lock of a single-lock lease, by its path and token
// (single-lock lease ids are unique per shard only).
type holdKey struct {
	lease uint64 // a session lease; 0 for a single-lock lock
	path  string
	token uint64
}

func sessionKey(lease uint64) holdKey { return holdKey{lease: lease} }

func singleKey(path string, token uint64) holdKey { return holdKey{path: path, token: token} }

// noticeKey is the registration a notice is for.
func noticeKey(ev *wire.Event) holdKey {
	if wire.SingleLease(ev.Lease) {
		return singleKey(ev.Path, ev.Token)
	}
	return sessionKey(ev.Lease)
}

// holdSub follows one shard: the local replica's feed, or a forwarded
// subscription on a peer connection.
type holdSub struct {
	h     *holdHub
	sh    Replica // local replica (nil: forwarded)
	id    uint64  // its feed subscription
	peer  *peer   // forwarded: the connection and its stream
	fwdID uint64
	dead  atomic.Bool   // the forwarded stream ended: subscribe again
	last  atomic.Uint64 // the shard revision it has covered: a renewal replays from the next
}

// Internal marks the hub's subscription as the node's own, not a watch.
func (sub *holdSub) Internal() bool { return true }

// Send implements feed.Subscriber for a local replica's feed.
func (sub *holdSub) Send(events []wire.Event) bool {
	if n := len(events); n > 0 {
		sub.last.Store(events[n-1].Rev)
	}
	sub.h.deliver(events)
	return true
}

func (sub *holdSub) stop() {
	if sub.sh != nil {
		sub.sh.Unwatch(sub.id)
		return
	}
	sub.peer.unstream(sub.fwdID)
	sub.peer.send(&wire.Request{Op: wire.OpUnwatch, Stream: sub.fwdID}, func(*wire.Response) {})
}

// holdResync is how often the hub checks which shards have a local replica
// to follow (replicas come and go with moves).
const holdResync = time.Second

// holdIdle drops a registration no keepalive renewed for this long: twice
// the longest TTL a node takes by default (600 s), with room to spare.
const holdIdle = 30 * time.Minute

// openHolds opens this connection's hold stream under the request's id.
func (c *conn) openHolds(req *wire.Request, done func(*wire.Response)) {
	c.mu.Lock()
	if c.holdStream != 0 && c.holdStream != req.ID {
		c.mu.Unlock()
		done(&wire.Response{Code: wire.InvalidArgument, Msg: "the connection's hold stream is already open"})
		return
	}
	c.holdStream = req.ID
	c.mu.Unlock()
	c.s.holds.start()
	done(&wire.Response{Stream: req.ID})
}

// keptAlive registers on the connection's hold stream the leases of an
// acknowledged keepalive that the service reports neither gone nor bound
// to another identity.
func (c *conn) keptAlive(req *wire.Request, resp *wire.Response) {
	if resp.Code != wire.OK {
		return
	}
	c.mu.Lock()
	open := c.holdStream != 0 && !c.closed
	c.mu.Unlock()
	if !open {
		return
	}
	var live []holdKey
	add := func(id uint64) {
		if id != 0 && !wire.SingleLease(id) && !slices.Contains(resp.Leases, id) && !slices.Contains(resp.Denied, id) {
			live = append(live, sessionKey(id))
		}
	}
	add(req.Lease)
	for _, id := range req.Leases {
		add(id)
	}
	c.s.holds.register(c, live)
}

// noteSingle keeps the registrations of single-lock locks on this
// connection's hold stream: a grant of a lock acquired (or an election
// campaigned for) without a session, or an acknowledged renewal, registers
// the lock; a release answered here, or a renewal that finds the lock gone,
// drops it from this connection.
func (c *conn) noteSingle(req *wire.Request, resp *wire.Response) {
	var key holdKey
	switch req.Op {
	case wire.OpAcquire, wire.OpCampaign:
		if req.Lease != 0 || resp.Code != wire.OK || resp.Token == 0 || !wire.SingleLease(resp.Lease) {
			return
		}
		key = singleKey(req.Path, resp.Token)
	case wire.OpRenew, wire.OpRelease:
		if req.Lease != 0 && !wire.SingleLease(req.Lease) {
			return // a session's hold: its lease's registration covers it
		}
		key = singleKey(req.Path, req.Token)
	default:
		return
	}
	if req.Op == wire.OpRelease || resp.Code == wire.NotHolder || resp.Code == wire.StaleToken {
		c.mu.Lock()
		_, registered := c.holdLeases[key]
		c.mu.Unlock()
		if registered {
			c.s.holds.drop(c, key)
		}
		return
	}
	if resp.Code != wire.OK {
		return
	}
	c.mu.Lock()
	open := c.holdStream != 0 && !c.closed
	c.mu.Unlock()
	if open {
		c.s.holds.register(c, []holdKey{key})
	}
}

// hideNoticeClients clears, in notices for this connection, the Client and
// Seq of the request that ended a hold (another client's) where this
// connection's identity may not see other clients' ids (hidesClients). The
// notice itself stays: the holder learns that its hold ended and how.
func (c *conn) hideNoticeClients(evs []wire.Event) {
	if c.s.policy() == nil {
		return
	}
	own := c.sec.helloOwned.Load()
	for i := range evs {
		if evs[i].Client != 0 && evs[i].Client != own && c.hidesClients(evs[i].Path) {
			evs[i].Client, evs[i].Seq = 0, 0
		}
	}
}

func (h *holdHub) register(c *conn, keys []holdKey) {
	if len(keys) == 0 {
		return
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.incomplete && h.kick != nil {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
	if h.byLease == nil {
		h.byLease = map[holdKey]map[*conn]time.Time{}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if c.holdLeases == nil {
		c.holdLeases = map[holdKey]struct{}{}
	}
	for _, k := range keys {
		c.holdLeases[k] = struct{}{}
	}
	c.mu.Unlock()
	for _, k := range keys {
		cs := h.byLease[k]
		if cs == nil {
			cs = map[*conn]time.Time{}
			h.byLease[k] = cs
		}
		cs[c] = now
	}
}

// unregister drops the registrations of key on the connections in cs
// (the caller has taken cs out of byLease).
func unregister(key holdKey, cs map[*conn]time.Time) {
	for c := range cs {
		c.mu.Lock()
		delete(c.holdLeases, key)
		c.mu.Unlock()
	}
}

// drop ends the registration of key on c.
func (h *holdHub) drop(c *conn, key holdKey) {
	h.mu.Lock()
	h.unlinkLocked(c, key)
	h.mu.Unlock()
	c.mu.Lock()
	delete(c.holdLeases, key)
	c.mu.Unlock()
}

// unlinkLocked takes c out of key's registrations (h.mu held).
func (h *holdHub) unlinkLocked(c *conn, key holdKey) {
	if cs := h.byLease[key]; cs != nil {
		delete(cs, c)
		if len(cs) == 0 {
			delete(h.byLease, key)
		}
	}
}

// sweep drops registrations no keepalive renewed within holdIdle; it runs
// at most once a minute.
func (h *holdHub) sweep(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Sub(h.swept) < time.Minute {
		return
	}
	h.swept = now
	for k, cs := range h.byLease {
		for c, at := range cs {
			if now.Sub(at) > holdIdle {
				delete(cs, c)
				unregister(k, map[*conn]time.Time{c: at})
			}
		}
		if len(cs) == 0 {
			delete(h.byLease, k)
		}
	}
}

// forget drops a closed connection's registrations.
func (h *holdHub) forget(c *conn, keys map[holdKey]struct{}) {
	if len(keys) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range keys {
		h.unlinkLocked(c, k)
	}
}

// deliver pushes each notice among events to the connections its lease (or
// single-lock lock) is registered on. For a local replica it runs inside
// the shard's apply: map lookups only, and nothing at all for the holder's
// own releases.
func (h *holdHub) deliver(events []wire.Event) {
	for i := range events {
		ev := &events[i]
		if !ev.TellsHolder() {
			continue
		}
		key := noticeKey(ev)
		h.mu.Lock()
		cs := h.byLease[key]
		var to []*conn
		for c := range cs {
			to = append(to, c)
		}
		if ev.Kind == wire.EvLeaseEnd || wire.SingleLease(ev.Lease) {
			delete(h.byLease, key) // the lease, or the single-lock lock, is gone: nothing more to tell
			unregister(key, cs)
		}
		h.mu.Unlock()
		for _, c := range to {
			c.pushHold(ev)
		}
	}
}

// pushHold sends one notice on the connection's hold stream. A client that
// does not read its connection cannot be told anything: the connection is
// closed, and the client learns the rest from its keepalive answers on a
// new one.
func (c *conn) pushHold(ev *wire.Event) {
	c.mu.Lock()
	stream := c.holdStream
	c.mu.Unlock()
	if stream == 0 {
		return
	}
	notice := []wire.Event{*ev}
	c.hideNoticeClients(notice)
	if !c.send(&wire.Response{Stream: stream, Events: notice}) && !c.isClosed() {
		c.s.slowConsumer()
		go c.close() // not from inside the feed: closing ends watches, which takes the feed's lock
	}
}

// start makes the hub follow every shard (once the first hold stream
// opens: a router whose clients open none pays nothing).
func (h *holdHub) start() {
	h.mu.Lock()
	if h.running {
		h.mu.Unlock()
		return
	}
	h.running = true
	h.subs, h.resume = map[uint64]*holdSub{}, map[uint64]uint64{}
	h.kick = make(chan struct{}, 1)
	h.incomplete = true
	h.mu.Unlock()
	h.s.wg.Add(1)
	go func() {
		defer h.s.wg.Done()
		h.follow()
	}()
}

// follow keeps one subscription per shard until the router closes. While
// a shard has none (the table not loaded yet, no replica reachable) it
// tries again every holdRetry.
func (h *holdHub) follow() {
	defer h.unsubscribeAll()
	for {
		wait := holdResync
		if !h.resync() {
			wait = holdRetry
		}
		h.sweep(time.Now())
		select {
		case <-h.s.stop:
			return
		case <-h.kick:
		case <-time.After(wait):
		}
	}
}

// holdRetry is how soon the hub tries again to follow a shard it could not.
const holdRetry = 100 * time.Millisecond

// resync subscribes to the shards that have no live subscription (a new
// shard, a new or restarted local replica, a forwarded stream that ended)
// and drops those that no longer fit (a replica that left or arrived). A
// renewed subscription replays from the revision after the one its
// predecessor covered, so the notices in between are pushed too (when the
// shard still retains them; else it starts from now, and the keepalive
// answers carry them). Only follow's goroutine changes subs; the feeds and
// peers are called without h.mu held (a feed calls Send with its own lock
// held, and deliver takes h.mu). It reports whether every shard is followed.
func (h *holdHub) resync() bool {
	want := map[uint64]Replica{} // shard -> its local replica, or nil
	if t := h.s.cache.table(); t != nil {
		for _, si := range t.Serving() {
			want[si.ID] = nil
		}
	}
	if host := h.s.cfg.Host; host != nil {
		for _, id := range host.ShardIDs() {
			if sh, ok := host.Replica(id); ok {
				want[id] = sh
			}
		}
	}
	h.mu.Lock()
	var drop []*holdSub
	for id, sub := range h.subs {
		sh, ok := want[id]
		if !ok || sub.sh != sh || sub.dead.Load() {
			drop = append(drop, sub)
			delete(h.subs, id)
			if last := sub.last.Load(); ok && last > 0 {
				h.resume[id] = last + 1
			}
		}
	}
	var add []uint64
	for id := range want {
		if h.subs[id] == nil {
			add = append(add, id)
		}
	}
	h.mu.Unlock()
	for _, sub := range drop {
		sub.stop()
	}
	complete := len(want) > 0
	for _, id := range add {
		h.mu.Lock()
		from := h.resume[id]
		h.mu.Unlock()
		sub, err := h.subscribe(id, want[id], from)
		if err != nil && from != 0 {
			sub, err = h.subscribe(id, want[id], 0) // what it missed is no longer retained
		}
		if err != nil {
			h.s.log.Debug("router: cannot follow a shard for hold notices yet", "shard", id, "err", err)
			complete = false
			continue
		}
		h.mu.Lock()
		h.subs[id] = sub
		delete(h.resume, id)
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.incomplete = !complete
	h.mu.Unlock()
	return complete
}

// subscribe follows shard id through its local replica sh, or, without one
// or when it cannot replay from (askElsewhere), through a node that has
// one, from revision from (0: from now).
func (h *holdHub) subscribe(id uint64, sh Replica, from uint64) (*holdSub, error) {
	if sh != nil {
		sub := &holdSub{h: h, sh: sh}
		subID, rev, err := sh.Watch("/", true, from, sub)
		switch {
		case err != nil && askElsewhere(err, false, sh):
		case err != nil:
			return nil, err
		default:
			sub.id = subID
			if sub.last.Load() < rev {
				sub.last.Store(rev)
			}
			return sub, nil
		}
	}
	// The leader as last heard first, then every other replica: the
	// router's idea of the leader may be a node that just went down, and
	// nothing else may correct it before the notices are due.
	addrs := h.s.cache.replicaAddrs(id)
	if leader, _ := h.s.cache.leaderAddr(id); leader != "" {
		addrs = append([]string{leader}, addrs...)
	}
	if len(addrs) == 0 {
		return nil, errors.New("no known replica")
	}
	var err error
	tried := map[string]bool{}
	for _, addr := range addrs {
		if tried[addr] {
			continue
		}
		tried[addr] = true
		var sub *holdSub
		if sub, err = h.subscribeThrough(id, addr, from); err == nil {
			return sub, nil
		}
	}
	return nil, err
}

// subscribeThrough follows shard id through the node at addr.
func (h *holdHub) subscribeThrough(id uint64, addr string, from uint64) (*holdSub, error) {
	sub := &holdSub{h: h}
	p, err := h.s.peers.get(addr)
	if err != nil {
		return nil, err
	}
	sub.peer = p
	started := make(chan error, 1)
	sub.fwdID = p.send(&wire.Request{Op: wire.OpWatch, Path: "/", Flags: wire.FlagPrefix | wire.FlagHoldNotices, Shard: id,
		Rev: from},
		func(r *wire.Response) {
			if r.Code != wire.OK {
				sub.dead.Store(true) // the stream ended (its connection, the replica, a slow consumer)
				select {
				case started <- r.AsError():
				default:
				}
				return
			}
			if n := len(r.Events); n > 0 && r.Events[n-1].Rev > sub.last.Load() {
				sub.last.Store(r.Events[n-1].Rev)
			} else if n == 0 && r.Rev > sub.last.Load() {
				sub.last.Store(r.Rev) // the first answer: the revision it starts after
			}
			select {
			case started <- nil:
			default:
			}
			h.deliver(r.Events)
		})
	if sub.fwdID == 0 {
		return nil, errPeerClosed
	}
	select {
	case err := <-started:
		if err != nil {
			return nil, err
		}
	case <-time.After(h.s.cfg.RequestTimeout):
		sub.stop()
		return nil, errors.New("no answer to the subscription")
	}
	return sub, nil
}

func (h *holdHub) unsubscribeAll() {
	h.mu.Lock()
	subs := h.subs
	h.subs = map[uint64]*holdSub{}
	h.mu.Unlock()
	for _, sub := range subs {
		sub.stop()
	}
}
