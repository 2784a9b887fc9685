// Package lease keeps a shard's lease deadlines on its leader: the lessor
// (keepalives, expiry, checkpoints of the time left), the clock it reads,
// and the recently lost holds keepalive answers report. Nothing about
// time is replicated.
package lease

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wardenlock/warden/internal/backoff"
	"github.com/wardenlock/warden/internal/leasetrace"
	"github.com/wardenlock/warden/internal/logagg"
	"github.com/wardenlock/warden/internal/testbugs"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// The lessor keeps lease deadlines in the leader's memory; nothing about time
// is replicated. It learns leases from applied events, gives every lease a
// full TTL when its replica becomes leader, refreshes deadlines on keepalives
// that a quorum-confirmed read has vouched for, and proposes Expire when a
// deadline passes. Once it has decided to expire a lease it refuses
// keepalives for it, so no keepalive is acknowledged for a lease whose Expire
// is already on its way into the log.
//
// Were a new leader to give every lease a full TTL, a dead holder's lease
// would never expire under steady leadership churn. So the leader
// checkpoints the time left on leases nobody keeps alive, and a new leader
// starts those at the checkpointed time plus a bounded allowance
// (checkpoint.go).

type lease struct {
	id       uint64
	ttl      time.Duration
	deadline time.Time
	expiring bool
	rev      uint64 // revision of the last create/renew: Expire carries it
	idx      int    // position in the heap, -1 when not in it
	// cp is the remaining time this lessor last saw recorded for the lease
	// in the log (valid when hasCP): checkpoint rounds use it to write only
	// what changed. Safety never rests on it (keepalives ask the state
	// machine).
	cp    time.Duration
	hasCP bool
	// fresh: loaded at this lessor's promotion and not kept alive through
	// it since.
	fresh bool
}

type leaseHeap []*lease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h leaseHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].idx = i; h[j].idx = j }
func (h *leaseHeap) Push(x any)        { l := x.(*lease); l.idx = len(*h); *h = append(*h, l) }
func (h *leaseHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.idx = -1
	return l
}

// leaseTracking is what the lessor records while it loads the lease table
// after a promotion: events that land during the load.
type leaseSeen struct {
	ttl time.Duration
	rev uint64
}

type leaseTracking struct {
	added map[uint64]leaseSeen
	ended map[uint64]struct{}
}

type Lessor struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	leader  bool
	term    uint64 // Raft term of the current leadership: carried by Expire
	epoch   uint64 // bumped on every leadership change
	loading *leaseTracking
	leases  map[uint64]*lease
	heap    leaseHeap

	// ExpireRate bounds Expire proposals per tick, so a mass expiry after a
	// long outage does not flood the log (etcd's leaseRevokeRate idea).
	expirePerTick int
	// expired logs expiries at info: the first of an interval in full,
	// the others as one line with their count.
	expired *logagg.Line

	kaQueue   []pendingKeepAlive // keepalives waiting for the next read-index round
	kaRunning bool

	// cpMu orders checkpoint rounds and keepalive rounds: a checkpoint is
	// computed, proposed and applied entirely before or entirely after a
	// keepalive round's read, clear and refresh, so no checkpoint can record
	// less time than a keepalive acknowledged.
	cpMu      sync.Mutex
	cpRunning bool      // a checkpoint round is in flight (under mu)
	cpLast    time.Time // when the last round started (under mu)

	// propose submits an internal request (the proposer; tests capture it).
	propose func(*wire.Request, func(*wire.Response))
	// spawn runs background rounds (go; tests run them inline).
	spawn func(func())
	// read runs a keepalive round's linearizable lease check (SyncRead;
	// tests read a state machine directly).
	read func(context.Context, statemachine.LeaseCheck) (any, error)
}

// Config is what a shard's lessor needs of its replica.
type Config struct {
	Shard uint64 // the shard's id (logs)
	Log   *slog.Logger
	Clock Clock
	// ReadTimeout bounds a keepalive round's read; CheckpointInterval is
	// how often the leader records the time left on leases nobody keeps
	// alive; LeaseAllowance is what a new leader adds to a checkpointed
	// remaining time (checkpoint.go).
	ReadTimeout, CheckpointInterval, LeaseAllowance time.Duration
	Stop                                            <-chan struct{} // closed when the shard stops
	// Propose submits an internal request to the shard's proposer.
	Propose func(*wire.Request, func(*wire.Response))
	// Read is a linearizable read of the local replica (SyncRead);
	// ReadFailed is the answer for request id when it failed with err.
	Read       func(ctx context.Context, q any) (any, error)
	ReadFailed func(id uint64, err error) *wire.Response
	// NotLeader is the answer for request id when this replica does not
	// lead (it names the leader when known).
	NotLeader func(id uint64) *wire.Response
	// Lost holds the shard's recently lost holds (lost.go).
	Lost *LostHolds
}

// New makes a shard's lessor; it does nothing until SetLeader(true, ...).
func New(cfg Config) *Lessor {
	l := &Lessor{cfg: cfg, log: cfg.Log, leases: make(map[uint64]*lease), expirePerTick: 1000,
		expired: logagg.New(cfg.Log, slog.LevelInfo, "lease expired", 10*time.Second)}
	if l.cfg.Lost == nil {
		l.cfg.Lost = &LostHolds{}
	}
	l.propose = cfg.Propose
	l.spawn = func(f func()) { go f() }
	l.read = func(ctx context.Context, q statemachine.LeaseCheck) (any, error) { return cfg.Read(ctx, q) }
	return l
}

// Term is the Raft term of the lessor's current or last leadership.
func (l *Lessor) Term() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term
}

// OnEvents is called from the observer (inside Update): keep it cheap.
func (l *Lessor) OnEvents(events []wire.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leader {
		return
	}
	now := l.cfg.Clock.Now()
	for i := range events {
		ev := &events[i]
		switch ev.Kind {
		case wire.EvLease, wire.EvRenewed:
			ttl := time.Duration(ev.TTL) * time.Millisecond
			if l.loading != nil {
				l.loading.added[ev.Lease] = leaseSeen{ttl, ev.Rev}
				continue
			}
			l.track(ev.Lease, ttl, ev.Rev, now)
		case wire.EvLeaseEnd:
			if l.loading != nil {
				l.loading.ended[ev.Lease] = struct{}{}
			}
			l.forget(ev.Lease)
		}
	}
}

// track adds a lease, or refreshes it to a full TTL from now.
func (l *Lessor) track(id uint64, ttl time.Duration, rev uint64, now time.Time) {
	le := l.leases[id]
	if le == nil {
		le = &lease{id: id, idx: -1}
		l.leases[id] = le
	}
	if leasetrace.On {
		l.trace("track", "lease", id, "ttl", ttl, "rev", rev, "now", tt(now), "old", tt(le.deadline), "new", tt(now.Add(ttl)))
	}
	le.ttl = ttl
	le.rev = max(le.rev, rev)
	le.deadline = now.Add(ttl)
	le.expiring = false
	le.hasCP = false // a new lease or a renewal through the log has none
	le.fresh = false
	if le.idx < 0 {
		heap.Push(&l.heap, le)
	} else {
		heap.Fix(&l.heap, le.idx)
	}
}

func (l *Lessor) forget(id uint64) {
	le := l.leases[id]
	if le == nil {
		return
	}
	if leasetrace.On {
		l.trace("forget", "lease", id)
	}
	delete(l.leases, id)
	if le.idx >= 0 {
		heap.Remove(&l.heap, le.idx)
	}
}

// SetLeader is called on every leadership change of the local replica.
func (l *Lessor) SetLeader(isLeader bool, term uint64) {
	l.mu.Lock()
	l.epoch++
	if leasetrace.On {
		l.trace("leadership", "leader", isLeader, "term", term, "epoch", l.epoch, "dropped", len(l.leases))
	}
	epoch := l.epoch
	l.leader = isLeader
	l.term = term
	l.leases = make(map[uint64]*lease)
	l.heap = nil
	l.loading = nil
	if isLeader {
		l.loading = &leaseTracking{added: map[uint64]leaseSeen{}, ended: map[uint64]struct{}{}}
	}
	l.mu.Unlock()
	if isLeader {
		go l.load(epoch)
	}
}

// load first commits this leadership's term (a no-op marker): from then on
// the state machine refuses expiries decided under older terms, so a deposed
// leader that resumes after a pause cannot end leases this lessor keeps
// alive. Then it reads the lease table with a linearizable read (so it
// includes every committed entry) and starts every lease with a full TTL
// from now. Keepalives are answered only after both.
func (l *Lessor) load(epoch uint64) {
	if !l.markTerm(epoch) {
		return
	}
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, err := l.cfg.Read(ctx, statemachine.LeasesQuery{})
		cancel()
		l.mu.Lock()
		if l.epoch != epoch {
			l.mu.Unlock()
			return
		}
		if err == nil {
			infos, _ := v.([]statemachine.LeaseInfo)
			l.install(infos)
			n := len(l.leases)
			l.mu.Unlock()
			l.log.Debug("lessor promoted", "shard", l.cfg.Shard, "leases", n)
			return
		}
		l.mu.Unlock()
		select {
		case <-l.cfg.Stop:
			return
		case <-time.After(lessorRetry.Delay(attempt)):
		}
	}
}

// install starts the lessor on the lease table it loaded: a full TTL from
// now, or the checkpointed remaining time plus the allowance. Leases created
// or renewed through the log during the load get a full TTL. Called with
// l.mu held.
func (l *Lessor) install(infos []statemachine.LeaseInfo) {
	now := l.cfg.Clock.Now()
	if testbugs.NoLeaseRefresh { // test-only switch: every lease is due at once
		now = now.Add(-10 * time.Minute)
	}
	for _, in := range infos {
		if _, gone := l.loading.ended[in.ID]; gone {
			continue
		}
		l.track(in.ID, time.Duration(in.TTL)*time.Millisecond, in.Rev, now)
		l.leases[in.ID].fresh = true
		if _, renewed := l.loading.added[in.ID]; !renewed && in.Checkpoint >= 0 {
			l.startFromCheckpoint(l.leases[in.ID], time.Duration(in.Checkpoint)*time.Millisecond, now)
		}
	}
	for id, seen := range l.loading.added {
		if _, gone := l.loading.ended[id]; !gone {
			l.track(id, seen.ttl, seen.rev, now)
		}
	}
	l.loading = nil
}

// markTerm proposes the term marker until it is applied; false when the
// leadership ended first.
func (l *Lessor) markTerm(epoch uint64) bool {
	l.mu.Lock()
	term := l.term
	l.mu.Unlock()
	for attempt := 0; ; attempt++ {
		done := make(chan *wire.Response, 1)
		l.propose(&wire.Request{Op: wire.OpNoop, Term: term}, func(r *wire.Response) { done <- r })
		var r *wire.Response
		select {
		case r = <-done:
		case <-l.cfg.Stop:
			return false
		}
		l.mu.Lock()
		current := l.epoch == epoch
		l.mu.Unlock()
		if !current {
			return false
		}
		if r.Code == wire.OK {
			return true
		}
		select {
		case <-l.cfg.Stop:
			return false
		case <-time.After(lessorRetry.Delay(attempt)):
		}
	}
}

// lessorRetry spaces a new leader's retries of its lease-table load and
// of its term marker.
var lessorRetry = backoff.Policy{Base: 20 * time.Millisecond, Max: 640 * time.Millisecond}

// Tick proposes Expire for leases whose deadline has passed.
func (l *Lessor) Tick() {
	l.mu.Lock()
	if !l.leader || l.loading != nil {
		l.mu.Unlock()
		return
	}
	now := l.cfg.Clock.Now()
	var due []*lease
	for len(l.heap) > 0 && len(due) < l.expirePerTick {
		le := l.heap[0]
		if le.deadline.After(now) {
			break
		}
		heap.Pop(&l.heap)
		le.expiring = true
		if leasetrace.On {
			l.trace("due", "lease", le.id, "deadline", tt(le.deadline), "now", tt(now), "rev", le.rev, "term", l.term)
		}
		due = append(due, le)
	}
	checkpoint := l.checkpointDue(now)
	epoch := l.epoch
	reqs := make([]*wire.Request, len(due))
	for i, le := range due {
		reqs[i] = &wire.Request{Op: wire.OpExpire, Lease: le.id, Rev: le.rev, Term: l.term}
	}
	l.mu.Unlock()
	for _, req := range reqs {
		l.proposeExpire(req, epoch)
	}
	if checkpoint {
		l.spawn(func() { l.checkpointRound(epoch) })
	}
}

// proposeExpire proposes Expire{Lease, Rev}. The state machine ignores it if
// the lease was renewed through the log after Rev (a Renew that was already
// in flight when the deadline passed), so an acknowledged renew is never
// undone by an older expiry decision.
func (l *Lessor) proposeExpire(req *wire.Request, epoch uint64) {
	id := req.Lease
	l.propose(req, func(resp *wire.Response) {
		if leasetrace.On {
			l.trace("expire outcome", "lease", id, "code", resp.Code, "msg", resp.Msg)
		}
		switch resp.Code {
		case wire.OK:
			l.expired.Add("", "shard", l.cfg.Shard, "lease", id)
			return
		case wire.Conflict:
			return // renewed meanwhile: the EvRenewed event re-tracked it
		}
		// Not applied or unknown outcome: try again while still leader.
		// Expire is idempotent, and the lease stays refused meanwhile.
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.epoch != epoch {
			return
		}
		if le := l.leases[id]; le != nil && le.idx < 0 {
			le.deadline = l.cfg.Clock.Now().Add(100 * time.Millisecond)
			heap.Push(&l.heap, le)
		}
	})
}

// KeepAlive refreshes the given leases and answers with the ones that are
// gone. It answers only after a read-index round has confirmed this replica
// is still the leader and the local state machine has caught up to it.
// Keepalives that arrive while a round is in flight share the next one, so
// the cost is one quorum round per batch, not per session.
func (l *Lessor) KeepAlive(req *wire.Request, done func(*wire.Response)) {
	ids := req.Leases
	if req.Lease != 0 {
		ids = append([]uint64{req.Lease}, ids...)
	}
	ka := pendingKeepAlive{id: req.ID, ids: ids, identity: req.Identity, received: l.cfg.Clock.Now(), done: done}
	l.mu.Lock()
	switch {
	case !l.leader:
		l.mu.Unlock()
		done(l.cfg.NotLeader(req.ID))
		return
	case l.loading != nil:
		l.mu.Unlock()
		done(&wire.Response{ID: req.ID, Code: wire.Unavailable, Msg: "new leader is loading leases"})
		return
	}
	l.kaQueue = append(l.kaQueue, ka)
	start := !l.kaRunning
	l.kaRunning = true
	l.mu.Unlock()
	if start {
		go l.keepAliveRounds()
	}
}

type pendingKeepAlive struct {
	id       uint64
	ids      []uint64
	identity string // the sender's proven identity ("" = auth off): leases bound to another are not refreshed
	received time.Time
	done     func(*wire.Response)
}

// keepAliveRounds runs read-index rounds until no keepalive is waiting.
func (l *Lessor) keepAliveRounds() {
	for {
		l.mu.Lock()
		batch := l.kaQueue
		l.kaQueue = nil
		if len(batch) == 0 {
			l.kaRunning = false
			l.mu.Unlock()
			return
		}
		epoch := l.epoch
		l.mu.Unlock()
		l.keepAliveRound(batch, epoch)
	}
}

// keepAliveRound confirms leadership with a read-index round, clears the
// checkpoints of the leases it is about to extend, and answers. It holds
// cpMu throughout, so no checkpoint round interleaves.
func (l *Lessor) keepAliveRound(batch []pendingKeepAlive, epoch uint64) {
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	q := leaseCheck(batch)
	all := q.IDs
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.ReadTimeout)
	v, err := l.read(ctx, q)
	cancel()
	if err != nil {
		if leasetrace.On {
			l.trace("keepalive read failed", "leases", q.IDs, "err", err)
		}
		for _, ka := range batch {
			ka.done(l.cfg.ReadFailed(ka.id, err))
		}
		return
	}
	states, ok := v.([]statemachine.LeaseState)
	if !ok || len(states) != len(all) {
		// Never expected; without an answer per lease nothing may be
		// acknowledged (a missing state would read as "unknown here": OK).
		for _, ka := range batch {
			ka.done(&wire.Response{ID: ka.id, Code: wire.Internal,
				Msg: fmt.Sprintf("lease check answered %T for %d leases", v, len(all))})
		}
		return
	}
	if ids := needsClear(states, all); len(ids) > 0 && !l.clearCheckpoints(ids) {
		// Extending these leases without the clear would let a next
		// leader end them early: no acknowledgement for them this time.
		for i, st := range states {
			if st == statemachine.LeaseCheckpointed {
				states[i] = leaseNotCleared
			}
		}
	}
	l.answerKeepAlives(batch, states, epoch)
}

// leaseNotCleared marks, inside the lessor only, a lease whose checkpoint
// could not be cleared: its keepalive is answered Unavailable.
const leaseNotCleared statemachine.LeaseState = 255

// leaseCheck is the state machine query for a batch of keepalives; it asks
// about owners only when some sender has an identity.
func leaseCheck(batch []pendingKeepAlive) statemachine.LeaseCheck {
	var q statemachine.LeaseCheck
	checkOwners := false
	for _, ka := range batch {
		q.IDs = append(q.IDs, ka.ids...)
		checkOwners = checkOwners || ka.identity != ""
	}
	if checkOwners {
		for _, ka := range batch {
			for range ka.ids {
				q.Identities = append(q.Identities, ka.identity)
			}
		}
	}
	return q
}

func (l *Lessor) answerKeepAlives(batch []pendingKeepAlive, states []statemachine.LeaseState, epoch uint64) {
	resps := make([]*wire.Response, len(batch))
	lost := !l.cfg.Lost.Empty()
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	i := 0
	for b, ka := range batch {
		resp := &wire.Response{ID: ka.id}
		resps[b] = resp
		if l.epoch != epoch || !l.leader {
			*resp = *l.cfg.NotLeader(ka.id)
			i += len(ka.ids)
			continue
		}
		if notCleared(states, i, len(ka.ids)) {
			*resp = wire.Response{ID: ka.id, Code: wire.Unavailable,
				Msg: "could not clear the lease's checkpoint; keepalive not applied, try again"}
			i += len(ka.ids)
			continue
		}
		if id, ok := l.endedSinceRead(ka.ids, states, i); ok {
			if leasetrace.On {
				l.trace("ended since the read", "lease", id, "req", ka.id)
			}
			*resp = wire.Response{ID: ka.id, Code: wire.Unavailable,
				Msg: fmt.Sprintf("lease %x ended while its keepalive was being checked; keepalive not applied, try again", id)}
			i += len(ka.ids)
			continue
		}
		for _, id := range ka.ids {
			state := statemachine.LeaseUnknown
			if i < len(states) {
				state = states[i]
			}
			i++
			if state == statemachine.LeaseForeign {
				resp.Denied = append(resp.Denied, id)
				continue
			}
			if gone := l.refresh(id, state, ka.received); gone {
				resp.Leases = append(resp.Leases, id)
			} else if le := l.leases[id]; lost && le != nil {
				resp.Events = l.cfg.Lost.Recent(resp.Events, id, 2*le.ttl+lostMargin, now)
			}
		}
		// Denied leases leave the code OK: one lease id can be bound to
		// different identities on different shards (whoever used it there
		// first), and one shard's refusal must not fail the owner's
		// keepalive for the shards where the lease is hers.
	}
	l.mu.Unlock()
	for b, ka := range batch {
		if leasetrace.On {
			l.trace("keepalive answer", "req", ka.id, "leases", ka.ids, "received", tt(ka.received),
				"code", resps[b].Code, "gone", resps[b].Leases, "denied", resps[b].Denied)
		}
		ka.done(resps[b])
	}
}

func notCleared(states []statemachine.LeaseState, from, n int) bool {
	for i := from; i < from+n && i < len(states); i++ {
		if states[i] == leaseNotCleared {
			return true
		}
	}
	return false
}

// endedSinceRead reports a lease of ids (states from offset from) that the
// state machine called alive at the round's read but this lessor no longer
// tracks. Within one leadership the lessor tracks every lease the state
// machine holds (install, then every EvLease), so such a lease ended (or
// left with its range) after the read: typically its deadline passed while
// the round waited for the read or for a checkpoint clear, tick proposed
// Expire, and the expiry applied before this answer. The read is stale for
// it, and the lessor has nothing to refresh: answering OK would acknowledge
// a keepalive for a lease that is already gone. Called with l.mu held.
func (l *Lessor) endedSinceRead(ids []uint64, states []statemachine.LeaseState, from int) (uint64, bool) {
	for k, id := range ids {
		if from+k >= len(states) {
			break
		}
		switch states[from+k] {
		case statemachine.LeaseAlive, statemachine.LeaseCheckpointed:
			if l.leases[id] == nil {
				return id, true
			}
		}
	}
	return 0, false
}

// refresh extends a live lease to received+TTL; it reports whether the
// lease is gone (ended, or already being expired). A lease the state machine
// calls alive must be tracked here (answerKeepAlives refuses the keepalive
// first otherwise, endedSinceRead). Called with l.mu held.
func (l *Lessor) refresh(id uint64, state statemachine.LeaseState, received time.Time) bool {
	if leasetrace.On {
		l.traceRefresh(id, state, received)
	}
	switch state {
	case statemachine.LeaseGone:
		return true
	case statemachine.LeaseAlive, statemachine.LeaseCheckpointed: // checkpointed: cleared just now
		le := l.leases[id]
		if le == nil {
			// Not reached through answerKeepAlives (endedSinceRead). If it
			// ever is, "gone" is the safe answer: nothing was refreshed.
			return true
		}
		if le.expiring {
			return true
		}
		le.fresh = false
		if d := received.Add(le.ttl); d.After(le.deadline) {
			le.deadline = d
			heap.Fix(&l.heap, le.idx)
		}
	}
	return false
}

// Remaining returns the time left on a lease, for introspection.
func (l *Lessor) Remaining(id uint64) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	le := l.leases[id]
	if le == nil || !l.leader {
		return 0, false
	}
	return le.deadline.Sub(l.cfg.Clock.Now()), true
}
