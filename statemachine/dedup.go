package statemachine

import (
	"slices"

	"github.com/wardenlock/warden/wire"
)

// Exactly-once: a client numbers its mutating requests (Client, Seq) and
// tells the shard, with AckSeq, below which number it has all answers. The
// shard remembers each outcome until then, so a retry (after a timeout, a
// leader change, a reconnect) gets the first answer instead of a second
// application. A queued acquire's record follows its waiter: a retry says
// Queued while it waits, then the grant, or Cancelled.
//
// AckSeq may pass a request that is still queued. Such a wait's record
// outlives the floor: once resolved it lingers until a later request of the
// client carries an AckSeq above it (the client has then seen the outcome),
// or until the client is forgotten. Resolving a wait counts as a use of the
// client, so a client that is away when its wait ends still finds the
// outcome for ClientIdleMs when it re-attaches.

type client struct {
	id         uint64
	floor      uint64 // AckSeq: records below it are dropped
	lastSeen   int64
	waiting    int // records whose waiter is still queued
	lingering  int // resolved records below the floor, kept until acked again
	prev, next *client
	records    map[uint64]*outcome
	// ahead holds the seqs of the records the floor has not passed yet, in
	// ascending order (with stale entries for records dropped early), so
	// raising the floor drops a prefix instead of scanning every record:
	// one client id can carry hundreds of requests in flight.
	ahead []uint64
	// lingerSeqs lists the lingering records (plus stale entries).
	lingerSeqs []uint64
}

func newClient(id, floor uint64) *client {
	return &client{id: id, floor: floor, records: map[uint64]*outcome{}}
}

// put adds a record. Seqs mostly arrive in order, so this is an append.
func (c *client) put(seq uint64, rec *outcome) {
	c.records[seq] = rec
	n := len(c.ahead)
	if n == 0 || c.ahead[n-1] < seq {
		c.ahead = append(c.ahead, seq)
		return
	}
	i, _ := slices.BinarySearch(c.ahead, seq)
	c.ahead = slices.Insert(c.ahead, i, seq)
}

// linger marks a resolved record as kept below the floor until acked again.
func (c *client) linger(seq uint64, rec *outcome) {
	rec.lingering = true
	c.lingering++
	c.lingerSeqs = append(c.lingerSeqs, seq)
}

// outcome is what a request answered, kept compactly for replay.
type outcome struct {
	op      wire.Op
	code    wire.Code
	mode    wire.Mode
	count   uint32
	msg     string
	token   uint64
	lease   uint64
	version uint64
	rev     uint64
	ttl     int64
	w       *waiter // while the acquire is queued
	// lingering: resolved while below the floor; dropped by the next
	// AckSeq above it.
	lingering bool
}

// dedupable: Cancel names its target by (Client, Seq), so it is not itself
// deduplicated; it is idempotent instead.
func dedupable(op wire.Op) bool { return op.Mutating() && op != wire.OpCancel }

func (s *StateMachine) touchClient(id uint64) *client {
	c := s.clients[id]
	if c == nil {
		c = newClient(id, 0)
		s.clients[id] = c
	} else {
		s.lru.remove(c)
	}
	c.lastSeen = s.now
	s.lru.pushBack(c)
	return c
}

// ack raises the client's floor and drops the records below it, except
// those of acquires still queued (their grant is yet to be told). Lingering
// records go once an AckSeq above them arrives, unless this very request
// retries them (it is about to read the outcome).
func (s *StateMachine) ack(c *client, ackSeq, seq uint64) {
	if ackSeq > c.floor {
		c.floor = ackSeq
		i := 0
		for ; i < len(c.ahead) && c.ahead[i] < ackSeq; i++ {
			// A queued record stays (resolve makes it lingering); a
			// lingering one is in lingerSeqs.
			if rec := c.records[c.ahead[i]]; rec != nil && rec.w == nil && !rec.lingering {
				delete(c.records, c.ahead[i])
				s.recycle(rec)
			}
		}
		c.ahead = c.ahead[i:]
	}
	if c.lingering == 0 {
		return
	}
	keep := c.lingerSeqs[:0]
	for _, recSeq := range c.lingerSeqs {
		rec := c.records[recSeq]
		switch {
		case rec == nil || !rec.lingering:
			// stale: dropped before
		case recSeq < ackSeq && recSeq != seq:
			delete(c.records, recSeq)
			c.lingering--
			s.recycle(rec)
		default:
			keep = append(keep, recSeq)
		}
	}
	c.lingerSeqs = keep
}

func (s *StateMachine) remember(c *client, r *wire.Request, out *wire.Response, queued *waiter) {
	if out.Code.Retryable() {
		return // not a decision: the retry must really run
	}
	rec := s.newRecord()
	*rec = outcome{op: r.Op, code: out.Code, mode: out.Mode, count: out.Count, msg: out.Msg, token: out.Token,
		lease: out.Lease, version: out.Version, rev: out.Rev, ttl: out.TTL}
	if out.Code == wire.Queued && queued != nil {
		rec.w = queued
		c.waiting++
	}
	c.put(r.Seq, rec)
}

// maxFreeRecs bounds the free list (under 128 KiB per replica): in the
// steady state each op retires about one record and makes one, so the
// list stays short; the bound only caps what a burst of acks leaves.
const maxFreeRecs = 1024

// recycle keeps a record that no client's table refers to any more (it was
// just deleted from one) for newRecord. Nothing else holds records: replay
// and the export and snapshot writers read them in place within Update.
// A reused record is overwritten whole, so no field of its first use
// survives; the pool changes allocations, not state.
func (s *StateMachine) recycle(rec *outcome) {
	if len(s.freeRecs) < maxFreeRecs {
		*rec = outcome{} // drop the references (msg, waiter) it held
		s.freeRecs = append(s.freeRecs, rec)
	}
}

func (s *StateMachine) newRecord() *outcome {
	if n := len(s.freeRecs); n > 0 {
		rec := s.freeRecs[n-1]
		s.freeRecs[n-1] = nil
		s.freeRecs = s.freeRecs[:n-1]
		return rec
	}
	return new(outcome)
}

func (rec *outcome) replay(out *wire.Response) {
	out.Code, out.Msg, out.Token, out.Lease = rec.code, rec.msg, rec.token, rec.lease
	out.Version, out.Rev, out.TTL, out.Mode, out.Count = rec.version, rec.rev, rec.ttl, rec.mode, rec.count
	if rec.w != nil {
		out.Code = wire.Queued
	}
}

// resolve records how a queued acquire ended, for retries and Cancel. The
// client counts as seen: its outcome is kept for at least ClientIdleMs.
func (s *StateMachine) resolve(w *waiter, result outcome) {
	if w.client == 0 {
		return
	}
	c := s.clients[w.client]
	if c == nil {
		return
	}
	rec := c.records[w.seq]
	if rec == nil || rec.w != w {
		return
	}
	rec.w = nil
	c.waiting--
	rec.code, rec.msg, rec.token, rec.lease, rec.mode, rec.count = result.code, result.msg, result.token,
		result.lease, result.mode, result.count
	if w.seq < c.floor {
		c.linger(w.seq, rec)
	}
	s.lru.remove(c)
	c.lastSeen = s.now
	s.lru.pushBack(c)
}

// sweepClients forgets clients idle for ClientIdleMs. One with a queued
// acquire is still in business: it is moved to the back as if just seen.
// The list is in last-use order, so the sweep stops at the first fresh one.
func (s *StateMachine) sweepClients() {
	for c := s.lru.head; c != nil && c.lastSeen+s.cfg.ClientIdleMs <= s.now; c = s.lru.head {
		s.lru.remove(c)
		if c.waiting > 0 {
			c.lastSeen = s.now
			s.lru.pushBack(c)
			continue
		}
		delete(s.clients, c.id)
	}
}

// clientList is an intrusive doubly linked list of clients.
type clientList struct{ head, tail *client }

func (l *clientList) pushBack(c *client) {
	c.prev, c.next = l.tail, nil
	if l.tail == nil {
		l.head = c
	} else {
		l.tail.next = c
	}
	l.tail = c
}

func (l *clientList) remove(c *client) {
	if c.prev == nil {
		l.head = c.next
	} else {
		c.prev.next = c.next
	}
	if c.next == nil {
		l.tail = c.prev
	} else {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
}
