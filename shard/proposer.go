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

type proposal struct {
	req  *wire.Request
	to   wire.Answerer
	span trace.Span // non-nil only for a traced request (trace.go)
}

// answer ends the proposal's span, if it has one, and answers it.
func (p proposal) answer(resp *wire.Response) {
	if p.span != nil {
		endSpan(p.span, resp)
	}
	p.to.Answer(resp)
}

// size estimates what a proposal adds to an entry (MaxBatchBytes).
func (p proposal) size() int { return len(p.req.Path) + len(p.req.Value) + 32 }

type inflight struct {
	rs    *dragonboat.RequestState
	props []proposal
	err   error
	at    time.Time // when it was proposed (the apply duration metric)
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
	session  *client.Session
	stop     chan struct{}
	maxOps   int
	maxBytes int
	hold     queueHold // acquires that can only queue, waiting for the next operation
	awaiters awaiters  // run's pool of goroutines waiting for entries' results

	pending atomic.Int64  // entries proposed and not yet answered (metrics; the batcher's yield hint)
	failed  atomic.Uint64 // entries that did not complete (dropped, timed out, rejected, ...)
	entries atomic.Uint64 // Raft entries proposed (Shard.Batches)
	ops     atomic.Uint64 // client operations in them
}

func newProposer(s *Shard) *proposer {
	return &proposer{
		s:        s,
		in:       make(chan proposal, s.cfg.QueueDepth),
		awaiters: awaiters{work: make(chan *inflight), max: max(1, s.cfg.MaxInflight)},
		session:  s.nh.GetNoOPSession(s.id),
		stop:     make(chan struct{}),
		maxOps:   s.cfg.MaxBatchOps,
		maxBytes: s.cfg.MaxBatchBytes,
		hold:     queueHold{max: s.cfg.QueueHold},
	}
}

// submit queues req; to is answered exactly once.
func (p *proposer) submit(req *wire.Request, to wire.Answerer) {
	pr := proposal{req: req, to: to}
	if req.Trace != "" {
		pr.span = p.s.traceSpan("apply", req)
	}
	// A plain send first: the select below locks both channels, and the
	// queue is rarely full.
	select {
	case p.in <- pr:
		return
	default:
	}
	select {
	case p.in <- pr:
	case <-p.stop:
		pr.answer(&wire.Response{ID: req.ID, Code: wire.Closed, Msg: "shard is stopping"})
	}
}

func (p *proposer) run() {
	defer p.awaiters.close()
	var (
		buf   []byte
		batch []proposal
		reqs  []*wire.Request
	)
	for {
		var expired, ok bool
		if batch, expired, ok = p.open(batch[:0]); !ok {
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
			p.fail(batch, err)
			continue
		}
		f := newInflight(batch)
		p.pending.Add(1)
		f.at = time.Now()
		f.rs, f.err = p.s.nh.Propose(p.session, buf, p.s.cfg.ProposalTimeout)
		p.entries.Add(1)
		p.ops.Add(uint64(len(batch)))
		if !p.hand(f) {
			if f.err != nil {
				p.fail(f.props, f.err)
			} else {
				f.rs.Release()
				p.failCode(f.props, wire.Ambiguous, "shard stopped while the proposal was in flight")
			}
			f.free()
			return
		}
	}
}

// open starts the next entry's batch: the held operations and the next one
// to arrive, or the held ones alone once their hold expired (expired).
// ok is false when the proposer is stopping (what was held is answered).
// Nothing held, a plain receive is tried first: the select locks every
// channel it waits on, and under load an operation is usually waiting.
func (p *proposer) open(batch []proposal) (_ []proposal, expired, ok bool) {
	if len(p.hold.held) == 0 {
		select {
		case first := <-p.in:
			return append(batch, first), false, true
		default:
		}
	}
	select {
	case first := <-p.in:
		return append(p.hold.take(batch), first), false, true
	case <-p.hold.expiry():
		p.hold.expired()
		return p.hold.take(batch), true, true
	case <-p.stop:
		p.failCode(p.hold.take(batch), wire.Closed, "shard is stopping")
		return batch, false, false
	}
}

// Each entry is answered as soon as its own result is known, by a goroutine
// that waits for that entry alone. Results of committed entries arrive in
// log order anyway, but a dropped or timed-out proposal does not: an entry
// proposed just before this replica lost touch with the leader (a new
// leader's term marker, an entry forwarded to a leader that then died) only
// resolves at ProposalTimeout, and waiting for it in order would hold every
// later answer, even ones already dropped at once ("no leader") or
// committed by the next leader, for that long. The proposer hands each entry
// straight to an idle awaiter (a goroutine per entry cost an allocation
// each; a goroutine in between, one more hand-off per entry). At most
// MaxInflight entries are waited on at a time: with every awaiter busy the
// proposer waits for one, which bounds the entries in flight.
type awaiters struct {
	work chan *inflight // unbuffered: a send finds an idle awaiter
	n    int            // awaiters started (the proposer's goroutine only)
	max  int
	wg   sync.WaitGroup
}

// close ends the awaiters once they have answered what they hold.
func (a *awaiters) close() {
	close(a.work)
	a.wg.Wait()
}

// hand gives f to an idle awaiter, or to a new one while fewer than max
// run, or else waits for one; false when the proposer stops first.
func (p *proposer) hand(f *inflight) bool {
	a := &p.awaiters
	select {
	case a.work <- f:
		return true
	default:
	}
	if a.n < a.max {
		a.n++
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			p.await(f)
			for f := range a.work {
				p.await(f)
			}
		}()
		return true
	}
	select {
	case a.work <- f:
		return true
	case <-p.stop:
		return false
	}
}

func (p *proposer) await(f *inflight) {
	defer p.pending.Add(-1)
	defer f.free()
	if f.err != nil {
		p.failed.Add(1)
		p.fail(f.props, f.err)
		return
	}
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
			props[i].answer(&resps[i])
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
		pr.answer(ErrorResponse(pr.req.ID, err, false))
	}
}

func (p *proposer) failCode(props []proposal, code wire.Code, msg string) {
	for _, pr := range props {
		pr.answer(&wire.Response{ID: pr.req.ID, Code: code, Msg: msg})
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
	last := p.s.LastTime()
	now := time.Now()
	if last == 0 {
		return p.s.clock.Now().UnixMilli()
	}
	if p.seenAt.IsZero() || last > p.seen+now.Sub(p.seenAt).Milliseconds() {
		p.seen, p.seenAt = last, now
	}
	return p.seen + now.Sub(p.seenAt).Milliseconds()
}
