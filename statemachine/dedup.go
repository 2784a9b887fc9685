package statemachine

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/cespare/xxhash/v2"

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
	// The records live in two places. ahead holds those at or above the
	// floor in seq order: seqs mostly arrive in order, so a new record is
	// an append, a new seq is told apart from a retry by one comparison
	// with the last, and raising the floor drops a prefix. One client id
	// carries hundreds of requests in flight, and this costs no hashing.
	// below holds the few the floor passed that stay (queued acquires and
	// lingering outcomes); it is nil until one does.
	ahead seqRecords
	below map[uint64]*outcome
	// lingerSeqs lists the lingering records (plus stale entries).
	lingerSeqs []uint64
}

type seqRecord struct {
	seq uint64
	rec *outcome
}

func newClient(id, floor uint64) *client { return &client{id: id, floor: floor} }

// record returns the client's record of seq, or nil.
func (c *client) record(seq uint64) *outcome {
	if seq < c.floor {
		return c.below[seq] // a nil map reads as empty
	}
	return c.ahead.find(seq)
}

// put adds (or replaces) the record of seq.
func (c *client) put(seq uint64, rec *outcome) {
	if seq < c.floor {
		c.keepBelow(seq, rec)
		return
	}
	c.ahead.put(seq, rec)
}

func (c *client) keepBelow(seq uint64, rec *outcome) {
	if c.below == nil {
		c.below = map[uint64]*outcome{}
	}
	c.below[seq] = rec
}

// drop forgets the record of seq.
func (c *client) drop(seq uint64) {
	if seq < c.floor {
		delete(c.below, seq)
		return
	}
	c.ahead.remove(seq)
}

// numRecords counts the client's records.
func (c *client) numRecords() int { return len(c.below) + c.ahead.len() }

// anyRecord reports whether f holds for one of the client's records, in no
// particular order.
func (c *client) anyRecord(f func(*outcome) bool) bool {
	for _, rec := range c.below {
		if f(rec) {
			return true
		}
	}
	for _, e := range c.ahead.live() {
		if f(e.rec) {
			return true
		}
	}
	return false
}

// sortedRecords appends the client's records to buf in seq order.
func (c *client) sortedRecords(buf []seqRecord) []seqRecord {
	start := len(buf)
	for seq, rec := range c.below {
		buf = append(buf, seqRecord{seq, rec})
	}
	slices.SortFunc(buf[start:], func(a, b seqRecord) int { return cmp.Compare(a.seq, b.seq) })
	return append(buf, c.ahead.live()...) // every one above those below
}

// linger marks a resolved record as kept below the floor until acked again.
func (c *client) linger(seq uint64, rec *outcome) {
	rec.lingering = true
	c.lingering++
	c.lingerSeqs = append(c.lingerSeqs, seq)
}

// seqRecords is a slice of records in seq order that is consumed from the
// front: buf[start:] is live. The dead prefix is reused before the slice
// grows, so a client whose window slides costs no allocations.
type seqRecords struct {
	buf   []seqRecord
	start int
}

func (q *seqRecords) live() []seqRecord { return q.buf[q.start:] }

func (q *seqRecords) len() int { return len(q.buf) - q.start }

func (q *seqRecords) find(seq uint64) *outcome {
	v := q.live()
	if len(v) == 0 || seq > v[len(v)-1].seq {
		return nil // the common case: a new request
	}
	if i, ok := slices.BinarySearchFunc(v, seq, cmpSeqRecord); ok {
		return v[i].rec
	}
	return nil
}

func cmpSeqRecord(e seqRecord, seq uint64) int { return cmp.Compare(e.seq, seq) }

func (q *seqRecords) put(seq uint64, rec *outcome) {
	v := q.live()
	if n := len(v); n == 0 || v[n-1].seq < seq {
		if len(q.buf) == cap(q.buf) && q.start >= len(q.buf)/2 {
			q.compact()
		}
		q.buf = append(q.buf, seqRecord{seq, rec})
		return
	}
	i, ok := slices.BinarySearchFunc(v, seq, cmpSeqRecord)
	if ok {
		v[i].rec = rec
		return
	}
	q.compact()
	q.buf = slices.Insert(q.buf, i, seqRecord{seq, rec})
}

func (q *seqRecords) remove(seq uint64) {
	v := q.live()
	if i, ok := slices.BinarySearchFunc(v, seq, cmpSeqRecord); ok {
		q.buf = slices.Delete(q.buf, q.start+i, q.start+i+1)
	}
}

// dropBelow removes the records below floor from the front and returns them
// (valid until the next change).
func (q *seqRecords) dropBelow(floor uint64) []seqRecord {
	v := q.live()
	i := 0
	for i < len(v) && v[i].seq < floor {
		i++
	}
	q.start += i
	return v[:i]
}

// compact moves the live records to the front of buf.
func (q *seqRecords) compact() {
	if q.start == 0 {
		return
	}
	n := copy(q.buf, q.live())
	clear(q.buf[n:])
	q.buf = q.buf[:n]
	q.start = 0
}

// outcome is what a request answered, kept compactly for replay.
type outcome struct {
	op   wire.Op
	code wire.Code
	mode wire.Mode
	// lingering: resolved while below the floor; dropped by the next
	// AckSeq above it.
	lingering bool
	count     uint32
	msg       string
	token     uint64
	lease     uint64
	version   uint64
	rev       uint64
	ttl       int64
	sum       uint64  // requestSum of the request answered; 0 = unknown (an older snapshot or move)
	w         *waiter // while the acquire is queued
}

// answers reports whether rec may answer a request with op and sum: a
// (Client, Seq) names one request, and a retry is the same request. Client
// ids are owned by identities (wire.OwnedClient), so a mismatch is the
// owner's own client reusing a Seq, never another identity's request.
// A withdrawal recorded ahead of its acquire (op OpCancel, opCancel)
// answers the acquire, campaign or multi-lock it withdrew.
func (rec *outcome) answers(op wire.Op, sum uint64) bool {
	same := rec.op == op || rec.op == wire.OpCancel && (op == wire.OpAcquire || op == wire.OpCampaign || op == wire.OpAcquireMulti)
	return same && (rec.sum == 0 || rec.sum == sum)
}

// requestSum digests what, besides its op, tells one request of a client
// from another: its path (every path of a multi-lock) and its lease. Only
// requests of one owned client id are ever compared, so this guards an
// owner against its own reuse of a Seq, not against forgery; 64 bits of
// xxhash make an accidental match negligible. It is never 0.
func requestSum(path string, paths []string, lease uint64) uint64 {
	h := xxhash.Sum64String(path)
	for _, p := range paths {
		h = bits.RotateLeft64(h, 17) ^ xxhash.Sum64String(p)
	}
	h ^= bits.RotateLeft64(lease*0x9e3779b97f4a7c15, 29)
	return h | 1
}

func sumOf(r *wire.Request) uint64 { return requestSum(r.Path, r.Paths, r.Lease) }

// dedupable: Cancel names its target by (Client, Seq), so it is not itself
// deduplicated; it is idempotent instead.
//
// A revocation is not recorded either: revoking an ended lease changes
// nothing, and a record made before a range move brought the lease's locks
// here must not answer for a retry that comes after (the router sends a
// revocation to every shard, and its parts meet a move at different
// moments).
func dedupable(op wire.Op) bool { return op.Mutating() && op != wire.OpCancel && op != wire.OpRevoke }

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
		passed := c.ahead.dropBelow(ackSeq)
		for i, e := range passed {
			// A queued record stays (resolve makes it lingering); so does
			// a lingering one, which is in lingerSeqs.
			if e.rec.w == nil && !e.rec.lingering {
				s.recycle(e.rec)
			} else {
				c.keepBelow(e.seq, e.rec)
			}
			passed[i] = seqRecord{}
		}
	}
	if c.lingering == 0 {
		return
	}
	keep := c.lingerSeqs[:0]
	for _, recSeq := range c.lingerSeqs {
		rec := c.record(recSeq)
		switch {
		case rec == nil || !rec.lingering:
			// stale: dropped before
		case recSeq < ackSeq && recSeq != seq:
			c.drop(recSeq)
			c.lingering--
			s.recycle(rec)
		default:
			keep = append(keep, recSeq)
		}
	}
	c.lingerSeqs = keep
}

func (s *StateMachine) remember(c *client, r *wire.Request, out *wire.Response, queued *waiter, sum uint64) {
	if out.Code.Retryable() {
		return // not a decision: the retry must really run
	}
	rec := s.newRecord()
	*rec = outcome{op: r.Op, code: out.Code, mode: out.Mode, count: out.Count, msg: out.Msg, token: out.Token,
		lease: out.Lease, version: out.Version, rev: out.Rev, ttl: out.TTL, sum: sum}
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
	rec := c.record(w.seq)
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

// Snapshot section 42 (exactly-once): each record's requestSum, client by
// client in LRU order and record by record in seq order, the order the
// core client section is written in. A snapshot without it recovers its
// records with sum 0 (unknown), which answers any retry of the same op.
const sectionRecordSums = 42

func init() {
	registerSection(snapSection{tag: sectionRecordSums, name: "record sums", save: saveRecordSums, load: loadRecordSums})
}

func saveRecordSums(s *StateMachine, w *snapWriter) {
	var buf []seqRecord
	var b [8]byte
	for c := s.lru.head; c != nil; c = c.next {
		buf = c.sortedRecords(buf[:0])
		w.uvarint(uint64(len(buf)))
		for _, e := range buf {
			binary.BigEndian.PutUint64(b[:], e.rec.sum)
			w.write(b[:])
		}
	}
}

func loadRecordSums(c *recovery) {
	r := c.r
	var buf []seqRecord
	var b [8]byte
	for cl := c.lru.head; cl != nil && r.err == nil; cl = cl.next {
		buf = cl.sortedRecords(buf[:0])
		if n := r.count(uint64(len(buf))); r.err == nil && n != len(buf) {
			r.fail(fmt.Errorf("client %d: %d record sums for %d records", cl.id, n, len(buf)))
		}
		for _, e := range buf {
			r.full(b[:])
			e.rec.sum = binary.BigEndian.Uint64(b[:])
		}
	}
}
