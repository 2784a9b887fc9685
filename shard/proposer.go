package shard

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/client"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// A single operation per Raft entry caps a shard near 1.5k writes/s on this
// class of machine; batching is what makes the service fast. The proposer
// drains whatever has queued while the previous entries were in flight into
// one entry, and keeps several entries in flight (a pipeline) so the disk and
// the network are never idle waiting for each other.
//
// Every entry costs Raft work whatever it carries (a WAL write and sync on
// each replica, message batches), so thin entries cost CPU. Two ways of
// waiting to fill them were measured in session 4: a per-shard wait once N
// entries are unanswered, and a node-wide bound on entries in flight
// (NodeInflight, takeSlot below). Both made entries fuller without lowering
// the CPU per operation (most of it is per Raft round and shard, not per
// entry), and the per-shard wait cost throughput at 16 shards, so it was
// removed and the node-wide bound is off by default (docs/scaling.md).

type proposal struct {
	req  *wire.Request
	done func(*wire.Response)
	span trace.Span // non-nil only for a traced request (trace.go)
}

// size estimates what a proposal adds to an entry (MaxBatchBytes).
func (p proposal) size() int { return len(p.req.Path) + len(p.req.Value) + 32 }

type inflight struct {
	rs    *dragonboat.RequestState
	props []proposal
	err   error
	at    time.Time     // when it was proposed (the apply duration metric)
	slot  chan struct{} // the node's slots, when this entry holds one
}

// inflights are reused: an entry's proposals are copied out of the
// batcher's slice into one that lives until the entry is answered.
var inflightPool = sync.Pool{New: func() any { return new(inflight) }}

func newInflight(batch []proposal) *inflight {
	f := inflightPool.Get().(*inflight)
	f.props = append(f.props[:0], batch...)
	return f
}

// free returns f to the pool once every proposal in it is answered.
func (f *inflight) free() {
	if f.slot != nil {
		<-f.slot
		f.slot = nil
	}
	clear(f.props) // drop the requests and callbacks
	if cap(f.props) > 1024 {
		f.props = nil
	}
	f.props, f.rs, f.err = f.props[:0], nil, nil
	inflightPool.Put(f)
}

type proposer struct {
	s        *Shard
	seen     int64     // anchor: a replicated time (applied, or stamped by this proposer)
	seenAt   time.Time // when it was that time (monotonic)
	in       chan proposal
	inflight chan *inflight
	session  *client.Session
	stop     chan struct{}
	maxOps   int
	maxBytes int
	slots    chan struct{} // the node's entry slots (Host.slots; nil: no bound)
	linger   *time.Timer
	hold     queueHold // acquires that can only queue, waiting for the next operation

	pending atomic.Int64  // entries proposed and not yet answered (metrics; the batcher's yield hint)
	failed  atomic.Uint64 // entries that did not complete (dropped, timed out, rejected, ...)
	entries atomic.Uint64 // Raft entries proposed (Shard.Batches)
	ops     atomic.Uint64 // client operations in them
}

func newProposer(s *Shard) *proposer {
	return &proposer{
		s:        s,
		in:       make(chan proposal, s.cfg.QueueDepth),
		inflight: make(chan *inflight, s.cfg.MaxInflight),
		session:  s.nh.GetNoOPSession(s.id),
		stop:     make(chan struct{}),
		maxOps:   s.cfg.MaxBatchOps,
		maxBytes: s.cfg.MaxBatchBytes,
		slots:    s.nodeSlots(),
		hold:     queueHold{max: s.cfg.QueueHold},
	}
}

// submit queues req; done is called exactly once with its answer.
func (p *proposer) submit(req *wire.Request, done func(*wire.Response)) {
	var span trace.Span
	if req.Trace != "" {
		if span = p.s.traceSpan("apply", req); span != nil {
			done = endSpan(span, done)
		}
	}
	select {
	case p.in <- proposal{req: req, done: done, span: span}:
	case <-p.stop:
		done(&wire.Response{ID: req.ID, Code: wire.Closed, Msg: "shard is stopping"})
	}
}

func (p *proposer) run() {
	defer close(p.inflight)
	var (
		buf   []byte
		batch []proposal
		reqs  []*wire.Request
	)
	for {
		expired := false
		select {
		case first := <-p.in:
			batch = append(p.hold.take(batch[:0]), first)
		case <-p.hold.expiry():
			p.hold.expired()
			batch, expired = p.hold.take(batch[:0]), true
		case <-p.stop:
			p.failCode(p.hold.take(batch[:0]), wire.Closed, "shard is stopping")
			return
		}
		size := 0
		for _, b := range batch {
			size += b.size()
		}
		// With entries already in flight a new one waits behind them
		// anyway: let the goroutines that are about to submit run first,
		// so a shard with a shallow queue still packs several operations
		// per entry. With nothing in flight (one client) it goes at once.
		yields := 0
		if p.pending.Load() > 0 {
			yields = 2
		}
	drain:
		for len(batch) < p.maxOps && size < p.maxBytes {
			select {
			case next := <-p.in:
				batch = append(batch, next)
				size += next.size()
			default:
				if yields == 0 {
					break drain
				}
				yields--
				runtime.Gosched()
			}
		}
		if p.hold.max > 0 && !expired && len(batch) < p.maxOps/2 && p.s.waits.mustQueue(batch) {
			p.hold.hold(batch) // queuehold.go
			continue
		}
		p.hold.release()
		var slot chan struct{}
		if p.slots != nil {
			batch, slot = p.takeSlot(batch, &size)
		}
		reqs = reqs[:0]
		for _, b := range batch {
			if b.span != nil {
				b.span.SetAttributes(attribute.Int("warden.batch.ops", len(batch)))
			}
			reqs = append(reqs, untraced(b.req))
		}
		var err error
		buf, err = statemachine.EncodeCommand(buf[:0], p.stamp(), reqs)
		if err != nil {
			if slot != nil {
				<-slot
			}
			p.fail(batch, err)
			continue
		}
		f := newInflight(batch)
		f.slot = slot
		p.pending.Add(1)
		f.at = time.Now()
		f.rs, f.err = p.s.nh.Propose(p.session, buf, p.s.cfg.ProposalTimeout)
		p.entries.Add(1)
		p.ops.Add(uint64(len(batch)))
		select {
		case p.inflight <- f:
		case <-p.stop:
			if f.rs != nil {
				f.rs.Release()
			}
			p.failCode(f.props, wire.Closed, "shard is stopping")
			f.free()
			return
		}
	}
}

// takeSlot takes one of the node's entry slots for the next entry. When
// every slot is taken (the node's shards together have NodeInflight entries
// in flight, i.e. the node is busy) the entry waits for one, up to
// EntryLinger, and the operations that arrive meanwhile join it: per entry,
// Raft costs every replica about ten operations' worth of CPU, so a node
// whose leaders each cut small entries as fast as their pipelines allow
// spends its CPU on entries rather than operations. An idle node has free
// slots and proposes at once. After EntryLinger the entry goes without a
// slot, so a shard whose entries are stuck (no leader) delays the node's
// other shards by at most that much per entry. Nil: no slot was free.
func (p *proposer) takeSlot(batch []proposal, size *int) ([]proposal, chan struct{}) {
	select {
	case p.slots <- struct{}{}:
		return batch, p.slots
	default:
	}
	if p.linger == nil {
		p.linger = time.NewTimer(p.s.cfg.EntryLinger)
	} else {
		p.linger.Reset(p.s.cfg.EntryLinger)
	}
	defer p.linger.Stop()
	in := p.in
	for {
		if len(batch) >= p.maxOps || *size >= p.maxBytes {
			in = nil
		}
		select {
		case p.slots <- struct{}{}:
			return batch, p.slots
		case next := <-in:
			batch = append(batch, next)
			*size += next.size()
		case <-p.linger.C:
			return batch, nil
		case <-p.stop:
			return batch, nil
		}
	}
}

// complete answers each batch as soon as its own result is known. Results
// of committed entries arrive in log order anyway, but a dropped or
// timed-out proposal does not: an entry proposed just before this replica
// lost touch with the leader (a new leader's term marker, an entry forwarded
// to a leader that then died) only resolves at ProposalTimeout, and waiting
// for it in order would hold every later answer, even ones already
// dropped at once ("no leader") or committed by the next leader, for that
// long. At most MaxInflight batches are waited on at a time.
func (p *proposer) complete() {
	var wg sync.WaitGroup
	work := make(chan *inflight)
	workers, limit := 0, max(1, p.s.cfg.MaxInflight)
	defer func() { close(work); wg.Wait() }()
	for f := range p.inflight {
		if f.err != nil {
			p.failed.Add(1)
			p.pending.Add(-1)
			p.fail(f.props, f.err)
			f.free()
			continue
		}
		// An idle waiter takes it; otherwise a new one starts, up to
		// MaxInflight: a goroutine per entry cost an allocation each.
		select {
		case work <- f:
			continue
		default:
		}
		if workers < limit {
			workers++
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.await(f)
				for f := range work {
					p.await(f)
				}
			}()
			continue
		}
		work <- f
	}
}

func (p *proposer) await(f *inflight) {
	defer p.pending.Add(-1)
	defer f.free()
	var res dragonboat.RequestResult
	select {
	case res = <-f.rs.ResultC():
	case <-p.stop:
		f.rs.Release()
		p.failCode(f.props, wire.Ambiguous, "shard stopped while the proposal was in flight")
		return
	}
	f.rs.Release()
	if !res.Completed() {
		p.failed.Add(1)
	} else if obs := p.s.applyObs.Load(); obs != nil && p.s.isLeader.Load() {
		(*obs)(time.Since(f.at))
	}
	p.finish(f.props, res)
}

func (p *proposer) finish(props []proposal, res dragonboat.RequestResult) {
	switch {
	case res.Completed():
		r := res.GetResult()
		resps, err := statemachine.DecodeResults(r.Data)
		if err != nil || len(resps) != len(props) {
			if len(resps) == 1 && resps[0].Code != wire.OK {
				p.failCode(props, resps[0].Code, resps[0].Msg)
				return
			}
			p.failCode(props, wire.Internal, "undecodable state machine result")
			return
		}
		for i := range props {
			resps[i].ID = props[i].req.ID
			props[i].done(&resps[i])
		}
	case res.Timeout():
		p.failCode(props, wire.Ambiguous, "proposal timed out; it may have been applied")
	case res.Dropped():
		p.failCode(props, wire.Unavailable, "shard has no leader (proposal dropped)")
	case res.Terminated():
		p.failCode(props, wire.Closed, "shard closed")
	default:
		p.failCode(props, wire.Unavailable, "proposal rejected or aborted")
	}
}

func (p *proposer) fail(props []proposal, err error) {
	for _, pr := range props {
		pr.done(ErrorResponse(pr.req.ID, err, false))
	}
}

func (p *proposer) failCode(props []proposal, code wire.Code, msg string) {
	for _, pr := range props {
		pr.done(&wire.Response{ID: pr.req.ID, Code: code, Msg: msg})
	}
}

// stamp is the time written into the next entry. Replicated time must not
// follow any one node's wall clock: a leader two hours ahead would age every
// dedup record and tombstone out at once. So a stamp is the replica's last
// applied stamp plus the real (monotonic) time since this proposer saw that
// stamp change: replicated time advances at the speed of real time, anchored
// to the cluster's own history, and no clock skew can make it jump. Only a
// shard's very first entry takes the wall clock.
//
// The anchor is this proposer's own estimate, re-anchored only when applied
// time moves past it (another leader's stamps). Re-anchoring at every
// applied change instead would drop the idle time between an entry's stamp
// and the next proposal, and replicated time would fall behind real time by
// every idle gap (a lock-delay or revocation deadline would then fire late).
func (p *proposer) stamp() int64 {
	last := p.s.lastTime()
	now := time.Now()
	if last == 0 {
		return p.s.clock.Now().UnixMilli()
	}
	if p.seenAt.IsZero() || last > p.seen+now.Sub(p.seenAt).Milliseconds() {
		p.seen, p.seenAt = last, now
	}
	return p.seen + now.Sub(p.seenAt).Milliseconds()
}
