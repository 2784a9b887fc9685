package router

import (
	"slices"
	"sync"
	"time"

	"github.com/wardenlock/warden/shard"
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
// leads it, so a leader change loses nothing. A shard this node holds no
// replica of pushes nothing here; its keepalive answers carry the same
// notices (shard/lostholds.go), as they do for a client whose connection
// broke and took a push with it: the holder hears within one keepalive
// interval at worst.
//
// Only the leases a connection's own acknowledged keepalives name are
// registered on it, and keepalives are checked against the connection's
// identity by every shard, so no connection hears of another identity's
// holds.

// holdHub is the router's registry of hold streams and its feed
// subscriptions.
type holdHub struct {
	s       *Server
	mu      sync.Mutex
	byLease map[uint64]map[*conn]struct{}
	subs    map[uint64]holdSub // shard id -> subscription to the local replica's feed
	running bool
}

type holdSub struct {
	sh *shard.Shard
	id uint64
}

// holdResync is how often the hub checks which shards have a local replica
// to follow (replicas come and go with moves).
const holdResync = time.Second

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
	var live []uint64
	add := func(id uint64) {
		if id != 0 && !slices.Contains(resp.Leases, id) && !slices.Contains(resp.Denied, id) {
			live = append(live, id)
		}
	}
	add(req.Lease)
	for _, id := range req.Leases {
		add(id)
	}
	c.s.holds.register(c, live)
}

func (h *holdHub) register(c *conn, leases []uint64) {
	if len(leases) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byLease == nil {
		h.byLease = map[uint64]map[*conn]struct{}{}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if c.holdLeases == nil {
		c.holdLeases = map[uint64]struct{}{}
	}
	for _, id := range leases {
		c.holdLeases[id] = struct{}{}
	}
	c.mu.Unlock()
	for _, id := range leases {
		cs := h.byLease[id]
		if cs == nil {
			cs = map[*conn]struct{}{}
			h.byLease[id] = cs
		}
		cs[c] = struct{}{}
	}
}

// forget drops a closed connection's registrations.
func (h *holdHub) forget(c *conn, leases map[uint64]struct{}) {
	if len(leases) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range leases {
		if cs := h.byLease[id]; cs != nil {
			delete(cs, c)
			if len(cs) == 0 {
				delete(h.byLease, id)
			}
		}
	}
}

// Send implements shard.Subscriber for the local replicas' feeds: it pushes
// each notice to the connections its lease is registered on. It never
// refuses events (the subscription stays), and runs inside the shard's
// apply: map lookups only, and nothing at all for the holder's own
// releases.
func (h *holdHub) Send(events []wire.Event) bool {
	for i := range events {
		ev := &events[i]
		if !ev.TellsHolder() {
			continue
		}
		h.mu.Lock()
		cs := h.byLease[ev.Lease]
		var to []*conn
		for c := range cs {
			to = append(to, c)
		}
		if ev.Kind == wire.EvLeaseEnd {
			delete(h.byLease, ev.Lease) // the lease is gone: nothing more to tell
		}
		h.mu.Unlock()
		for _, c := range to {
			c.pushHold(ev)
		}
	}
	return true
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
	if !c.send(&wire.Response{Stream: stream, Events: []wire.Event{*ev}}) && !c.isClosed() {
		c.s.slowConsumer()
		go c.close() // not from inside the feed: closing ends watches, which takes the feed's lock
	}
}

// start makes the hub follow the local replicas' feeds (once the first
// hold stream opens: a node whose clients open none pays nothing).
func (h *holdHub) start() {
	h.mu.Lock()
	if h.running || h.s.cfg.Host == nil {
		h.mu.Unlock()
		return
	}
	h.running = true
	h.subs = map[uint64]holdSub{}
	h.mu.Unlock()
	h.s.wg.Add(1)
	go func() {
		defer h.s.wg.Done()
		h.follow()
	}()
}

// follow keeps one subscription on each local replica's feed until the
// router closes.
func (h *holdHub) follow() {
	defer h.unsubscribeAll()
	for {
		h.resync()
		select {
		case <-h.s.stop:
			return
		case <-time.After(holdResync):
		}
	}
}

// resync subscribes to local replicas that have none yet (a new replica,
// or one restarted in place) and drops subscriptions of replicas that left.
// Only follow's goroutine changes subs; the feeds are called without h.mu
// held (a feed calls Send with its own lock held, and Send takes h.mu).
func (h *holdHub) resync() {
	host := h.s.cfg.Host
	want := map[uint64]*shard.Shard{}
	for _, id := range host.ShardIDs() {
		if sh, ok := host.Shard(id); ok {
			want[id] = sh
		}
	}
	h.mu.Lock()
	var drop []holdSub
	for id, sub := range h.subs {
		if want[id] != sub.sh {
			drop = append(drop, sub)
			delete(h.subs, id)
		}
	}
	var add []uint64
	for id := range want {
		if _, ok := h.subs[id]; !ok {
			add = append(add, id)
		}
	}
	h.mu.Unlock()
	for _, sub := range drop {
		sub.sh.Unwatch(sub.id)
	}
	for _, id := range add {
		subID, _, err := want[id].Watch("/", true, 0, h)
		if err != nil {
			h.s.log.Warn("router: cannot follow a shard's feed for hold notices", "shard", id, "err", err)
			continue
		}
		h.mu.Lock()
		h.subs[id] = holdSub{sh: want[id], id: subID}
		h.mu.Unlock()
	}
}

func (h *holdHub) unsubscribeAll() {
	h.mu.Lock()
	subs := h.subs
	h.subs = map[uint64]holdSub{}
	h.mu.Unlock()
	for _, sub := range subs {
		sub.sh.Unwatch(sub.id)
	}
}
