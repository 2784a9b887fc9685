package statemachine

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/wardenlock/warden/wire"
)

var errBadMode = errors.New("bad lock mode")

// RecoverFromSnapshot replaces all state with the snapshot's. On error the
// state machine keeps its previous state.
func (s *StateMachine) RecoverFromSnapshot(rd io.Reader, _ []sm.SnapshotFile, stop <-chan struct{}) error {
	r := &snapReader{r: bufio.NewReaderSize(rd, 1<<20), stop: stop}
	rec := &recovery{StateMachine: &StateMachine{cfg: s.cfg, state: newState()}, r: r}
	rec.readState()
	if r.err != nil {
		return r.err
	}
	s.state = rec.state
	s.nextDeadline.Store(s.computeNextDeadline())
	s.rangeOps = make([]uint64, len(s.ranges))
	s.lastTime.Store(s.now)
	s.lastIndex.Store(s.applied)
	return nil
}

// recovery rebuilds state into a fresh StateMachine value.
type recovery struct {
	*StateMachine
	r *snapReader
}

func (c *recovery) readState() {
	r := c.r
	magic := make([]byte, len(snapshotMagic))
	r.full(magic)
	if r.err == nil && string(magic) != snapshotMagic {
		r.fail(errors.New("not a Warden snapshot"))
	}
	if v := r.uvarint(); r.err == nil && v != snapshotVersion {
		r.fail(fmt.Errorf("snapshot version %d is not supported", v))
	}
	if id := r.uvarint(); r.err == nil && id != c.cfg.ShardID {
		r.fail(fmt.Errorf("snapshot of shard %d offered to shard %d", id, c.cfg.ShardID))
	}
	c.now = r.varint()
	c.rev, c.fence, c.floor, c.applied, c.rangeGen = r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
	c.maxTerm = r.uvarint()
	ranges := make([]wire.Range, r.count(1<<20))
	for i := range ranges {
		ranges[i] = wire.Range{Start: r.str(), End: r.str(), Shard: r.uvarint(), Gen: r.uvarint()}
	}
	c.setRanges(ranges, c.rangeGen)
	c.readLeases()
	c.readClients()
	if r.err == nil {
		c.readKids(c.trie.Root(), r.str())
	}
	c.checkLeaseLists()
	c.readSections()
	if r.err == nil {
		c.recountTenants()
	}
	r.full(magic)
	if r.err == nil && string(magic) != snapshotMagic {
		r.fail(errors.New("missing end marker"))
	}
}

func (c *recovery) readLeases() {
	r := c.r
	for n := r.count(math.MaxInt32); n > 0 && r.err == nil; n-- {
		l := &lease{id: r.uvarint(), ttl: r.varint(), rev: r.uvarint()}
		l.holders = make([]*holder, r.count(math.MaxInt32))
		l.waiters = make([]*waiter, r.count(math.MaxInt32))
		l.keys = make([]*lockNode, r.count(math.MaxInt32))
		c.leases[l.id] = l
	}
	for n := r.count(math.MaxInt32); n > 0 && r.err == nil; n-- {
		t := tomb{id: r.uvarint(), at: r.varint()}
		c.tombs[t.id] = t.at
		c.tombList = append(c.tombList, t)
	}
}

func (c *recovery) readClients() {
	r := c.r
	for n := r.count(math.MaxInt32); n > 0 && r.err == nil; n-- {
		cl := newClient(r.uvarint(), r.uvarint())
		cl.lastSeen = r.varint()
		for m := r.count(math.MaxInt32); m > 0 && r.err == nil; m-- {
			seq := r.uvarint()
			rec := &outcome{op: wire.Op(r.uvarint()), code: wire.Code(r.uvarint()), mode: modeOf(r.uvarint(), r),
				count: uint32(r.uvarint()), msg: r.str(), token: r.uvarint(), lease: r.uvarint(),
				version: r.uvarint(), rev: r.uvarint(), ttl: r.varint()}
			if r.flag() {
				rec.w = pendingWaiter // linked when the waiter is read
			}
			if r.flag() {
				cl.linger(seq, rec)
			}
			cl.put(seq, rec)
		}
		c.clients[cl.id] = cl
		c.lru.pushBack(cl)
	}
}

// pendingWaiter marks a record whose waiter has not been read yet.
var pendingWaiter = &waiter{}

// readKids reads the rest of node n (its name is already read).
func (c *recovery) readKids(n *lockNode, _ string) {
	r := c.r
	r.tick()
	if r.flag() {
		c.readHolder(n, &n.Val.first)
	}
	if r.flag() {
		e := n.Val.extension()
		for m := r.count(math.MaxInt32); m > 0 && r.err == nil; m-- {
			h := &holder{}
			e.more = append(e.more, h)
			c.readHolder(n, h)
		}
		c.readQueue(n, e)
		c.readKV(n, e)
		e.leader = r.bytes()
	}
	for k := r.count(math.MaxInt32); k > 0 && r.err == nil; k-- {
		name := r.str()
		if r.err == nil && (name == "" || n.Child(name) != nil) {
			r.fail(fmt.Errorf("bad child name %q", name))
			return
		}
		c.readKids(c.trie.EnsureChild(n, name), name)
	}
}

func (c *recovery) readHolder(n *lockNode, h *holder) {
	r := c.r
	*h = holder{node: n, owner: r.str(), lw: r.uvarint(), token: r.uvarint(), count: uint32(r.uvarint()),
		mode: modeOf(r.uvarint(), r), campaign: r.flag()}
	id := h.lw
	if id&SingleLeaseBit != 0 {
		ttl, rev := r.varint(), r.uvarint()
		if r.err == nil && (id != SingleLeaseBit|h.token || ttl < 0 || ttl > maxSingleTTL || h.count != 1) {
			r.fail(fmt.Errorf("single-lock lease %#x does not match its holder", id))
		}
		h.setSingle(ttl, rev)
	} else {
		h.leaseIdx = uint32(r.uvarint())
	}
	if r.err != nil {
		return
	}
	if h.token == 0 || h.count == 0 {
		r.fail(errors.New("holder without token or count"))
		return
	}
	c.trie.AddHeld(n, h.mode, 1)
	c.nLocks++
	if h.single {
		if c.singles.get(h.token) != nil {
			r.fail(fmt.Errorf("token %d holds twice", h.token))
			return
		}
		c.singles.put(h)
		return
	}
	l := c.leases[id]
	if l == nil || int(h.leaseIdx) >= len(l.holders) || l.holders[h.leaseIdx] != nil {
		r.fail(fmt.Errorf("holder of lease %x does not fit its lease", id))
		return
	}
	l.holders[h.leaseIdx] = h
}

func (c *recovery) readQueue(n *lockNode, e *nodeExt) {
	r := c.r
	for m := r.count(math.MaxInt32); m > 0 && r.err == nil; m-- {
		w := &waiter{node: n, owner: r.str(), lease: r.uvarint(), ttl: r.varint(), client: r.uvarint(),
			seq: r.uvarint(), arrival: r.uvarint(), value: r.bytes(), leaseIdx: uint32(r.uvarint()),
			mode: modeOf(r.uvarint(), r), campaign: r.flag()}
		if r.err != nil {
			return
		}
		if e.tail == nil {
			e.head = w
		} else {
			e.tail.next, w.prev = w, e.tail
		}
		e.tail = w
		c.trie.AddQueued(n, w.mode, 1)
		c.nWaiters++
		c.linkWaiter(w)
	}
}

func (c *recovery) linkWaiter(w *waiter) {
	r := c.r
	if w.lease != 0 {
		l := c.leases[w.lease]
		if l == nil || int(w.leaseIdx) >= len(l.waiters) || l.waiters[w.leaseIdx] != nil {
			r.fail(fmt.Errorf("waiter of lease %x does not fit its lease", w.lease))
			return
		}
		l.waiters[w.leaseIdx] = w
	}
	if w.client == 0 {
		return
	}
	if cl := c.clients[w.client]; cl != nil {
		if rec := cl.record(w.seq); rec != nil && rec.w == pendingWaiter {
			rec.w = w
			cl.waiting++
		}
	}
}

func (c *recovery) readKV(n *lockNode, e *nodeExt) {
	r := c.r
	if !r.flag() {
		return
	}
	kv := &kvEntry{value: r.bytes(), version: r.uvarint(), createRev: r.uvarint(), modRev: r.uvarint(),
		lease: r.uvarint(), leaseIdx: uint32(r.uvarint())}
	e.kv = kv
	c.nKVs++
	if kv.lease == 0 || r.err != nil {
		return
	}
	l := c.leases[kv.lease]
	if l == nil || int(kv.leaseIdx) >= len(l.keys) || l.keys[kv.leaseIdx] != nil {
		r.fail(fmt.Errorf("key of lease %x does not fit its lease", kv.lease))
		return
	}
	l.keys[kv.leaseIdx] = n
}

// checkLeaseLists verifies that every lease got all its entries back and
// every queued record found its waiter.
func (c *recovery) checkLeaseLists() {
	if c.r.err != nil {
		return
	}
	for _, l := range c.leases {
		if slicesHaveNil(l.holders) || slicesHaveNil(l.waiters) || slicesHaveNil(l.keys) {
			c.r.fail(fmt.Errorf("lease %x lost entries", l.id))
			return
		}
	}
	for _, cl := range c.clients {
		if cl.anyRecord(func(rec *outcome) bool { return rec.w == pendingWaiter }) {
			c.r.fail(fmt.Errorf("client %d has a queued record without a waiter", cl.id))
			return
		}
	}
}

func slicesHaveNil[E comparable](v []E) bool {
	var zero E
	for _, x := range v {
		if x == zero {
			return true
		}
	}
	return false
}
