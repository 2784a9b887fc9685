package router

import (
	"encoding/json"
	"errors"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/wire"
)

// conn serves one client (or peer) connection: a reader that decodes frames
// and dispatches each request without waiting for the previous one, and a
// writer that batches answers into as few writes as possible.
type conn struct {
	s    *Server
	nc   net.Conn
	sem  chan struct{}
	wake chan struct{}
	quit chan struct{}

	hello  bool
	peer   bool
	client uint64 // router-assigned client id for requests that carry none
	acks   ackTracker
	sec    connSecurity // identity proved in Hello (auth.go)
	budget *hostBudget  // the client IP's read budget (flood.go); nil = none
	share  *fairShare   // this connection's fair share of it (flood.go); nil = none
	meter  readMeter    // reader goroutine only
	rd     readDeadline // reader goroutine only (idle.go)
	pauses int          // reader pauses for the budget (reader goroutine only)

	mu      sync.Mutex
	out     []byte
	closed  bool
	parked  map[clientSeq]parkedWait
	watches map[uint64]*watch
	// holdStream is the id of the connection's hold stream (0: not open),
	// holdLeases the session leases and single-lock locks registered on it
	// (holds.go).
	holdStream uint64
	holdLeases map[holdKey]struct{}
}

type clientSeq struct{ client, seq uint64 }

type parkedWait struct {
	path  string
	lease uint64
}

type watch struct {
	shard uint64
	local uint64 // feed subscription id on a local replica
	peer  *peer  // or: the forwarding connection and its stream id
	fwdID uint64
	// prefix, when set, is a prefix watch over every shard (prefixwatch.go).
	prefix *prefixWatch
}

func newConn(s *Server, nc net.Conn, budget *hostBudget) *conn {
	return &conn{s: s, nc: nc, budget: budget, share: s.newFairShare(budget), sem: make(chan struct{}, s.cfg.MaxInflight), wake: make(chan struct{}, 1),
		quit: make(chan struct{}), client: randomID(), parked: map[clientSeq]parkedWait{}, watches: map[uint64]*watch{}}
}

func (c *conn) serve() {
	writerDone := make(chan struct{})
	go func() { defer close(writerDone); c.writeLoop() }()
	c.readLoop()
	c.close()
	<-writerDone
}

func (c *conn) readLoop() {
	// A small buffer until the handshake is done and nothing is buffered:
	// connections that never say hello hold 4 KiB, not 64.
	r, small := getReader(c.nc, true), true
	defer func() { putReader(r, small) }()
	var buf []byte
	for {
		if c.hello {
			// Past the handshake the reader keeps its own deadline
			// (idle.go): idle connections, stalled frames.
			if r.Buffered() == 0 && !c.awaitFrame(r) {
				return
			}
			if !frameBuffered(r) {
				c.armRead(false)
			}
		}
		var err error
		buf, err = wire.ReadFrameSkip(r, c.s.cfg.MaxFrame, c.oversizeSkip(), buf)
		if err != nil {
			if c.hello && isTimeout(err) {
				c.stalled()
				return
			}
			if c.misdialed(err, r) {
				return // another protocol: told so (misdial.go)
			}
			// fe is declared here, not per frame: its address escapes,
			// which would cost an allocation for every frame read.
			var fe *wire.FrameSizeError
			if !errors.As(err, &fe) {
				return
			}
			c.send(&wire.Response{Code: wire.TooLarge, Msg: fe.Error()})
			if fe.Skipped {
				c.sec.oversize++
				if c.pace(r, wire.FrameHeaderSize+fe.Size) {
					continue // the body was discarded; the stream is in step
				}
			}
			oversizeClosed.Add(1)
			return
		}
		if !c.pace(r, wire.FrameHeaderSize+len(buf)) {
			return
		}
		cl := &call{c: c}
		if err := wire.DecodeRequest(buf, &cl.req); err != nil {
			// The stream is in step (the frame was read whole), but a
			// client that sends what does not decode is broken or hostile:
			// it is told why, and the connection ends.
			c.send(errorResponse(0, err))
			return
		}
		if !c.hello && cl.req.Op != wire.OpHello {
			c.send(&wire.Response{ID: cl.req.ID, Code: wire.InvalidArgument, Msg: "the first frame must be a hello"})
			return
		}
		if !c.takeSlot() {
			return
		}
		c.handle(cl)
		if small && c.hello && r.Buffered() == 0 {
			putReader(r, true)
			r, small = getReader(c.nc, false), false
		}
	}
}

// takeSlot takes one of the connection's in-flight slots, waiting for one
// while MaxInflight requests are unanswered; false when the connection
// closed meanwhile. A plain send first: the select locks both channels.
func (c *conn) takeSlot() bool {
	select {
	case c.sem <- struct{}{}:
		return true
	default:
	}
	select {
	case c.sem <- struct{}{}:
		return true
	case <-c.quit:
		return false
	}
}

func (c *conn) writeLoop() {
	var spare []byte
	for {
		select {
		case <-c.wake:
		case <-c.quit:
			// Flush what was answered before the close (an error that
			// explains the close, typically), then close the socket.
			c.mu.Lock()
			buf := c.out
			c.out = nil
			c.mu.Unlock()
			if len(buf) > 0 {
				c.nc.Write(buf)
			}
			c.nc.Close()
			return
		}
		if len(c.sem) > 0 {
			// More answers are on their way (a Raft entry's answers are
			// handed out one after another): let them queue, and send
			// them in this write rather than one write each.
			runtime.Gosched()
		}
		c.mu.Lock()
		buf := c.out
		c.out = spare[:0]
		c.mu.Unlock()
		if len(buf) == 0 {
			spare = buf
			continue
		}
		if _, err := c.nc.Write(buf); err != nil {
			c.close()
			c.nc.Close()
			return
		}
		spare = buf
	}
}

// send queues one frame; it reports false when the client is not reading
// fast enough (its queue is over the limit) or the connection is closed.
func (c *conn) send(resp *wire.Response) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.out = wire.AppendResponseFrame(c.out, resp)
	over := len(c.out) > c.s.cfg.MaxOutBuffer
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return !over
}

func (c *conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *conn) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	parked := c.parked
	watches := c.watches
	held := c.holdLeases
	c.parked, c.watches, c.holdLeases = map[clientSeq]parkedWait{}, map[uint64]*watch{}, nil
	c.mu.Unlock()
	c.sec.unwatched(len(watches))
	c.s.holds.forget(c, held)
	// The writer flushes and closes the socket (which also ends the
	// reader); the deadline keeps a client that stopped reading from
	// holding it open.
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	close(c.quit)
	for _, w := range watches {
		c.endWatch(w)
	}
	if c.peer {
		// A forwarding router owns its waits: it retries them elsewhere
		// or cancels them itself when its client goes away.
		return
	}
	// A session-bound wait outlives the connection: the client re-attaches
	// with the same (client, seq), or its session expires and takes the
	// waiter with it. A wait without a session has nothing else to end it.
	for k, pw := range parked {
		if pw.lease == 0 {
			c.s.abandon(k, pw)
		}
	}
}

// finish answers a request and frees its in-flight slot. A session-less
// grant that arrives after the client went away is released, so nothing
// stays locked for a client that can never learn its token. (A session-bound
// grant stays: the client re-attaches with the same request, or its session
// expires.)
func (c *conn) finish(req *wire.Request, resp *wire.Response, arrived time.Duration) {
	<-c.sem
	resp.ID = req.ID
	c.s.sign(req, resp, arrived)
	if len(resp.Waiters) > 0 && c.hidesClients(req.Path) {
		c.hideWaiterClients(resp.Waiters)
	}
	if !c.send(resp) && c.isClosed() && !c.peer && req.Lease == 0 && isGrant(req, resp) {
		c.s.releaseOrphan(req, resp)
	}
}

func isGrant(req *wire.Request, resp *wire.Response) bool {
	return (req.Op == wire.OpAcquire || req.Op == wire.OpCampaign) && resp.Code == wire.OK && resp.Token != 0
}

// call is one request read from a connection, from its frame to its
// answer. It carries in one allocation the request and everything its
// answer needs (metrics and span, the parked-wait and sequence bookkeeping,
// the routing retries), where closures wrapped around one another would
// cost an allocation each.
type call struct {
	req wire.Request
	c   *conn
	t   tracked
	// try routes the call; try.parked: registered in c.parked, forget it
	// at the answer; try.acked: carries a router-assigned seq, mark it
	// answered.
	try routeTry
}

// Answer implements wire.Answerer: the request's final answer.
func (cl *call) Answer(resp *wire.Response) {
	c, req := cl.c, &cl.req
	if cl.try.parked {
		c.mu.Lock()
		delete(c.parked, clientSeq{req.Client, req.Seq})
		c.mu.Unlock()
	}
	if cl.try.acked {
		c.acks.finish(req.Seq)
	}
	if !c.peer {
		c.noteSingle(req, resp)
	}
	cl.t.done(req, resp)
	c.finish(req, resp, cl.t.start)
}

func (c *conn) handle(cl *call) {
	req := &cl.req
	cl.t = c.s.track(req, c.peer)
	if req.Has(wire.FlagSigned) && cl.t.start == 0 {
		cl.t.start = monoNow() // a signature's expiry counts from it (sign.go)
	}
	to := c.admit(req, cl)
	if to == nil {
		return // refused: answered, nothing routed (auth.go)
	}
	if !c.peer {
		req.Identity = c.leaseIdentity(req)
		if req.Client != 0 && c.sec.ownsClients {
			req.Client = c.ownedClient(req.Client)
			if req.Op == wire.OpHello {
				c.sec.helloOwned.Store(req.Client)
			}
		}
	}
	if req.Op.Internal() && !(c.peer && req.Shard != 0 && req.Op.PeerInternal()) {
		// Range-move steps come from the node driving a move, over an
		// authenticated forwarding connection, for one of our replicas.
		to.Answer(&wire.Response{Code: wire.InvalidArgument, Msg: req.Op.String() + " is internal to the server"})
		return
	}
	if c.peer && req.Shard != 0 {
		// Forwarded by another node's router for one of our replicas: run
		// it here, never route or fan it out again.
		switch req.Op {
		case wire.OpWatch:
			c.watch(req, to.Answer)
		case wire.OpUnwatch:
			c.unwatch(req, to.Answer)
		default:
			c.s.execLocal(req, to)
		}
		return
	}
	if isRangeAdmin(req.Op) {
		c.rangeAdmin(req, to.Answer)
		return
	}
	switch req.Op {
	case wire.OpHello:
		c.helloFrom(req, to.Answer)
	case wire.OpStatus:
		b, _ := json.Marshal(c.s.Status())
		to.Answer(&wire.Response{Value: b})
	case wire.OpRanges:
		info := c.s.routeInfo()
		b, _ := msgpack.Marshal(&info)
		resp := &wire.Response{Value: b, Table: c.s.routeTable(info)}
		if info.Table != nil {
			resp.Ranges = info.Table.Ranges
		}
		to.Answer(resp)
	case wire.OpWatch:
		c.watch(req, to.Answer)
	case wire.OpUnwatch:
		c.unwatch(req, to.Answer)
	case wire.OpNodeJoin, wire.OpNodeAdmin, wire.OpReplicaMove, wire.OpShards, wire.OpShardTransfer,
		wire.OpShardAdd, wire.OpShardRetire, wire.OpShardLog:
		if clusterAdmin(req.Op) {
			c.auditAdmin(req)
		}
		c.s.placementOp(req, to.Answer) // nodes.go
	case wire.OpCancel:
		c.cancel(req, to.Answer)
	case wire.OpKeepAlive:
		c.s.keepAlive(req, func(resp *wire.Response) {
			c.keptAlive(req, resp)
			c.hideNoticeClients(resp.Events)
			to.Answer(resp)
		})
	case wire.OpHolds:
		c.openHolds(req, to.Answer)
	case wire.OpRevoke:
		c.assignSeq(cl)
		c.s.revokeEverywhere(req, cl.Answer) // revoke.go
	default:
		c.routeData(cl)
	}
}

func (c *conn) helloFrom(req *wire.Request, done func(*wire.Response)) {
	if req.Rev != 0 && req.Rev != wire.ProtocolVersion {
		done(&wire.Response{Code: wire.InvalidArgument, Msg: "unsupported protocol version"})
		return
	}
	c.hello = true
	c.peer = req.Has(wire.FlagPeer)
	info := map[string]any{"protocol": wire.ProtocolVersion}
	if h := c.s.cfg.Host; h != nil {
		info["node"] = h.NodeID()
	}
	c.s.ttl.addTo(info)
	if c.peer && c.s.policy() != nil {
		// A forwarding router checks its clients itself; one without a
		// policy must not forward to a node that has one (dialPeer).
		info["auth"] = true
	}
	b, _ := json.Marshal(info)
	done(&wire.Response{Value: b})
}

// assignSeq gives a mutating request without (client, seq) a router-scoped
// pair, so the router's own retries are deduplicated too; the call then
// marks the seq answered in c.acks when it is answered.
func (c *conn) assignSeq(cl *call) {
	req := &cl.req
	if req.Client == 0 && req.Op.Mutating() {
		req.Client = c.client
		req.Seq = c.acks.start()
		req.AckSeq = c.acks.floor()
	}
	cl.try.acked = req.Client == c.client
}

// routeData routes a lock, election or KV request, the hot path: cl
// answers every attempt itself, so nothing else is allocated for it.
func (c *conn) routeData(cl *call) {
	req := &cl.req
	req.Shard = 0
	if req.Op == wire.OpAcquireMulti && req.Path == "" && len(req.Paths) > 0 {
		req.Path = req.Paths[0] // the first path routes the set
	}
	if err := hierarchy.Validate(req.Path, c.s.cfg.Paths); err != nil {
		cl.Answer(errorResponse(req.ID, err))
		return
	}
	c.assignSeq(cl)
	if (req.Op == wire.OpListLocks || req.Op == wire.OpKVList) && c.s.spansShards(req.Path) {
		c.s.broadcast(req, cl.Answer)
		return
	}
	if (req.Op == wire.OpAcquire || req.Op == wire.OpCampaign) && req.Wait != wire.WaitNone {
		c.mu.Lock()
		c.parked[clientSeq{req.Client, req.Seq}] = parkedWait{path: req.Path, lease: req.Lease}
		c.mu.Unlock()
		cl.try.parked = true
	}
	cl.try.s, cl.try.req, cl.try.deadline, cl.try.quit, cl.try.done = c.s, req, monoNow()+c.s.budget(req), c.quit, cl
	cl.try.start()
}

// cancel withdraws one of this connection's waits (the client's context
// ended). The answer is OK with a token if the grant won the race.
func (c *conn) cancel(req *wire.Request, done func(*wire.Response)) {
	client := req.Client
	if client == 0 {
		client = c.client
	}
	c.mu.Lock()
	pw, ok := c.parked[clientSeq{client, req.Seq}]
	c.mu.Unlock()
	if !ok && req.Path != "" {
		// The wait was made on another connection (one that broke, or
		// another router): route the cancel by its path.
		if err := hierarchy.Validate(req.Path, c.s.cfg.Paths); err != nil {
			done(errorResponse(req.ID, err))
			return
		}
		pw, ok = parkedWait{path: req.Path}, true
	}
	if !ok {
		done(&wire.Response{Code: wire.NotFound, Msg: "no such waiting request (give its path to cancel it from another connection)"})
		return
	}
	// The paths, lease and owner of a multi-lock go along (the shard answers
	// the holds it still has), and the lease names the acquire to a shard
	// that has not seen it yet (its withdrawal record answers that acquire).
	lease := req.Lease
	if lease == 0 {
		lease = pw.lease
	}
	c.s.route(&wire.Request{ID: req.ID, Op: wire.OpCancel, Path: pw.path, Paths: req.Paths, Lease: lease,
		Owner: req.Owner, Client: client, Seq: req.Seq, Identity: req.Identity, Trace: req.Trace}, done)
}

// ackTracker hands out sequence numbers and knows the lowest one still
// unanswered, which becomes AckSeq so the state machine can drop the dedup
// records below it.
type ackTracker struct {
	mu   sync.Mutex
	next uint64
	low  uint64
	done map[uint64]bool
}

func (a *ackTracker) start() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done == nil {
		a.done = map[uint64]bool{}
		a.next, a.low = 1, 1
	}
	s := a.next
	a.next++
	return s
}

func (a *ackTracker) floor() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.low
}

func (a *ackTracker) finish(seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.done[seq] = true
	for a.done[a.low] {
		delete(a.done, a.low)
		a.low++
	}
}
