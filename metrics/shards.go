package metrics

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// shardMetrics observes the node's replicas. Raft health is read from the
// NodeHost at scrape time; state counts come from StatsQuery (a stale read,
// no Raft round); lock, lease and election events are counted from each
// replica's event feed.
//
// Counts of replicated state (locks held, leases, ...) and of applied events
// are reported only by the shard's current leader, so summing a metric over
// the nodes of a cluster counts each shard once.
//
// Replicas come and go while the node runs (shards are created and
// retired, replicas move): each scrape follows the replicas the node hosts
// then (syncReplicas).
type shardMetrics struct {
	node Node
	reg  metric.Registration

	subMu  sync.Mutex
	sets   map[uint64]metric.MeasurementOption
	subs   map[uint64]replicaSub // data shard → its followed local replica
	closed bool

	ev eventCounters

	mu        sync.Mutex
	firstTerm map[uint64]uint64
}

type shardGauges struct {
	hasLeader, isLeader, term, applied, logged, lag metric.Int64ObservableGauge
	leaderChanges                                   metric.Int64ObservableCounter
	locks, waiters, leases, keys, fence             metric.Int64ObservableGauge
	watchers                                        metric.Int64ObservableGauge
	proposalsPending, proposalsQueued               metric.Int64ObservableGauge
	proposalsFailed, rangeMoves                     metric.Int64ObservableCounter
	snapshotsSaved, snapshotsRecovered              metric.Int64ObservableCounter
}

func newShardMetrics(m metric.Meter, h Node) (*shardMetrics, error) {
	sm := &shardMetrics{node: h, sets: map[uint64]metric.MeasurementOption{},
		subs: map[uint64]replicaSub{}, firstTerm: map[uint64]uint64{}}
	var g shardGauges
	var b builder
	b.m = m
	g.hasLeader = b.gauge("warden.raft.has_leader", "", "1 when this replica knows a leader of the shard.")
	g.isLeader = b.gauge("warden.raft.is_leader", "", "1 when this replica leads the shard.")
	g.term = b.gauge("warden.raft.term", "", "The Raft term this replica is in.")
	g.leaderChanges = b.counter("warden.raft.leader_changes", "{election}",
		"Raft elections this replica has seen since it started (term increases).")
	g.applied = b.gauge("warden.raft.applied_index", "", "Last log index applied by this replica's state machine.")
	// dragonboat does not expose the commit index of a running replica; the
	// last entry in its log is at most a few in-flight entries past it.
	g.logged = b.gauge("warden.raft.log_index", "", "Last entry in this replica's Raft log (committed or about to be).")
	g.lag = b.gauge("warden.raft.apply_lag", "{entry}", "Entries in this replica's log not yet applied.")
	g.locks = b.gauge("warden.locks.held", "{lock}", "Held lock grants (reported by the shard leader).")
	g.waiters = b.gauge("warden.lock.waiters", "{waiter}", "Queued lock requests (reported by the shard leader).")
	g.leases = b.gauge("warden.leases.active", "{lease}", "Live leases (reported by the shard leader).")
	g.keys = b.gauge("warden.kv.keys", "{key}", "KV keys (reported by the shard leader).")
	g.fence = b.gauge("warden.fencing.token.max", "", "Highest fencing token the shard has issued, or its floor.")
	g.watchers = b.gauge("warden.watchers", "{watch}", "Watch subscriptions on this node's replica.")
	g.proposalsPending = b.gauge("warden.raft.proposals.pending", "{entry}", "Entries this node proposed to the shard and has not had answered yet.")
	g.proposalsQueued = b.gauge("warden.raft.proposals.queued", "{op}", "Client operations waiting to be batched into an entry.")
	g.proposalsFailed = b.counter("warden.raft.proposals.failed", "{entry}",
		"Entries this node proposed that did not complete (no leader, timed out, rejected).")
	g.rangeMoves = b.counter("warden.range.moves", "{move}", "Ranges moved between shards, as recorded by this node.")
	g.snapshotsSaved = b.counter("warden.raft.snapshots.saved", "{snapshot}",
		"Snapshots this replica saved (every --snapshot-entries entries or --snapshot-log-bytes of log) since the process started.")
	g.snapshotsRecovered = b.counter("warden.raft.snapshots.recovered", "{snapshot}",
		"Snapshots this replica recovered its state from since the process started: its own at a restart, or the leader's when it fell behind the compacted log.")
	if b.err != nil {
		return nil, b.err
	}
	var err error
	if sm.ev, err = newEventCounters(m); err != nil {
		return nil, err
	}
	sm.reg, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		sm.observe(o, &g)
		return nil
	}, g.hasLeader, g.isLeader, g.term, g.leaderChanges, g.applied, g.logged, g.lag,
		g.locks, g.waiters, g.leases, g.keys, g.fence, g.watchers,
		g.proposalsPending, g.proposalsQueued, g.proposalsFailed, g.rangeMoves, g.snapshotsSaved, g.snapshotsRecovered)
	if err != nil {
		return nil, err
	}
	h.OnReplicasChanged(func() {
		if err := sm.syncReplicas(); err != nil {
			otel.Handle(err)
		}
	})
	if err := sm.syncReplicas(); err != nil {
		sm.close()
		return nil, err
	}
	return sm, nil
}

// builder collects the first instrument error so definitions read as a list.
type builder struct {
	m   metric.Meter
	err error
}

func (b *builder) gauge(name, unit, desc string) metric.Int64ObservableGauge {
	opts := []metric.Int64ObservableGaugeOption{metric.WithDescription(desc)}
	if unit != "" {
		opts = append(opts, metric.WithUnit(unit))
	}
	g, err := b.m.Int64ObservableGauge(name, opts...)
	if err != nil && b.err == nil {
		b.err = err
	}
	return g
}

func (b *builder) counter(name, unit, desc string) metric.Int64ObservableCounter {
	c, err := b.m.Int64ObservableCounter(name, metric.WithDescription(desc), metric.WithUnit(unit))
	if err != nil && b.err == nil {
		b.err = err
	}
	return c
}

// replicaSub is a local replica whose events and apply times are counted.
type replicaSub struct {
	s   Replica
	sub uint64 // its feed subscription
}

// set returns the attribute set of a shard's series.
func (sm *shardMetrics) set(id uint64) metric.MeasurementOption {
	sm.subMu.Lock()
	defer sm.subMu.Unlock()
	return sm.setLocked(id)
}

func (sm *shardMetrics) setLocked(id uint64) metric.MeasurementOption {
	set, ok := sm.sets[id]
	if !ok {
		set = metric.WithAttributeSet(attribute.NewSet(attribute.String("shard", strconv.FormatUint(id, 10))))
		sm.sets[id] = set
	}
	return set
}

// syncReplicas follows the local replicas that appeared since the last
// call and forgets those that are gone (their feeds ended with them).
func (sm *shardMetrics) syncReplicas() error {
	sm.subMu.Lock()
	defer sm.subMu.Unlock()
	if sm.closed {
		return nil
	}
	local := map[uint64]bool{}
	for _, id := range sm.node.ShardIDs() {
		s, ok := sm.node.Replica(id)
		if !ok {
			continue
		}
		local[id] = true
		if cur, ok := sm.subs[id]; ok && cur.s == s {
			continue
		}
		subID, _, err := s.Watch("/", true, 0, &eventSub{sm: sm, shard: s})
		if err != nil {
			return err
		}
		sm.subs[id] = replicaSub{s: s, sub: subID}
		// Proposal to local apply, timed by the proposer: the entries'
		// stamps are replicated time, which is anchored to the shard's
		// history and runs at a fixed offset from any node's wall clock, so
		// "now minus stamp" measured that offset (every entry landed in
		// one 50–100 ms bucket), not the apply time.
		rec := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("shard", strconv.FormatUint(id, 10))))}
		s.SetApplyObserver(func(d time.Duration) {
			sm.ev.apply.Record(context.Background(), d.Seconds(), rec...)
		})
	}
	for id := range sm.subs {
		if !local[id] {
			delete(sm.subs, id)
		}
	}
	return nil
}

func (sm *shardMetrics) close() {
	sm.node.OnReplicasChanged(nil)
	if sm.reg != nil {
		sm.reg.Unregister()
	}
	sm.subMu.Lock()
	defer sm.subMu.Unlock()
	sm.closed = true
	for id, sub := range sm.subs {
		if s, ok := sm.node.Replica(id); ok && s == sub.s {
			s.Unwatch(sub.sub)
			s.SetApplyObserver(nil)
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// observe runs at scrape time.
func (sm *shardMetrics) observe(o metric.Observer, g *shardGauges) {
	infos := map[uint64]RaftInfo{}
	for _, si := range sm.node.Raft() {
		infos[si.Shard] = si
	}
	o.ObserveInt64(g.rangeMoves, int64(sm.node.RangeMoves()))
	if err := sm.syncReplicas(); err != nil {
		otel.Handle(err)
	}
	for _, id := range append([]uint64{placement.MetaShard}, sm.node.ShardIDs()...) {
		set := sm.set(id)
		si, ok := infos[id]
		if !ok {
			continue
		}
		o.ObserveInt64(g.hasLeader, b2i(si.Leader != 0), set)
		o.ObserveInt64(g.isLeader, b2i(si.Leader == si.Replica), set)
		o.ObserveInt64(g.term, int64(si.Term), set)
		o.ObserveInt64(g.leaderChanges, int64(sm.termsSeen(id, si.Term)), set)
		logged := si.Logged
		if si.HasLog {
			o.ObserveInt64(g.logged, int64(logged), set)
		}
		if id == placement.MetaShard {
			continue
		}
		st, ok := sm.node.Stats(id)
		if !ok {
			continue
		}
		o.ObserveInt64(g.applied, int64(st.Applied), set)
		if logged >= st.Applied {
			o.ObserveInt64(g.lag, int64(logged-st.Applied), set)
		}
		if s, ok := sm.node.Replica(id); ok {
			o.ObserveInt64(g.watchers, int64(s.Watchers()), set)
			queued, pending, failed := s.ProposalStats()
			o.ObserveInt64(g.proposalsQueued, int64(queued), set)
			o.ObserveInt64(g.proposalsPending, pending, set)
			o.ObserveInt64(g.proposalsFailed, int64(failed), set)
			saved, recovered := s.Snapshots()
			o.ObserveInt64(g.snapshotsSaved, int64(saved), set)
			o.ObserveInt64(g.snapshotsRecovered, int64(recovered), set)
		}
		if si.Leader != si.Replica {
			continue
		}
		o.ObserveInt64(g.locks, int64(st.Locks), set)
		o.ObserveInt64(g.waiters, int64(st.Waiters), set)
		o.ObserveInt64(g.leases, int64(st.Leases), set)
		o.ObserveInt64(g.keys, int64(st.KVs), set)
		o.ObserveInt64(g.fence, int64(st.Fence), set)
	}
}

// termsSeen is how far the term has moved since this process first saw the
// shard: every increase is an election (with PreVote, a term only moves
// when a candidate can win).
func (sm *shardMetrics) termsSeen(id, term uint64) uint64 {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	first, ok := sm.firstTerm[id]
	if !ok || term < first {
		sm.firstTerm[id] = term
		return 0
	}
	return term - first
}

// eventCounters count what applied entries did, by cause.
type eventCounters struct {
	granted, released, leaseEnded *tally // slot: the cause, or otherCause
	leaseCreated, electionChanges *tally // one slot
	apply                         metric.Float64Histogram
}

// otherCause is the cause tallies' slot for causes without a name.
const otherCause = int(wire.CauseMoved) + 1

// applyBuckets span 100 µs (a quiet local commit) to 5 s.
var applyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

func newEventCounters(m metric.Meter) (eventCounters, error) {
	byCause := func() *tally {
		t := newTally(otherCause + 1)
		for c := wire.CauseNone; c <= wire.CauseMoved; c++ {
			if name := c.String(); known(name) {
				t.sets[c] = metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", codeLabel(name))))
			}
		}
		t.sets[otherCause] = metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", "other")))
		return t
	}
	plain := func() *tally {
		t := newTally(1)
		t.sets[0] = metric.WithAttributeSet(attribute.NewSet())
		return t
	}
	e := eventCounters{granted: byCause(), released: byCause(), leaseEnded: byCause(),
		leaseCreated: plain(), electionChanges: plain()}
	for _, c := range []struct {
		t                *tally
		name, unit, desc string
	}{
		{e.granted, "warden.locks.granted", "{grant}", "Lock grants applied, by cause (direct, handoff)."},
		{e.released, "warden.locks.released", "{release}", "Lock grants ended, by cause (released, expired, revoked, ...)."},
		{e.leaseCreated, "warden.lease.created", "{lease}", "Leases created."},
		{e.leaseEnded, "warden.lease.ended", "{lease}", "Leases ended, by cause (expired, revoked)."},
		{e.electionChanges, "warden.election.leader_changes", "{change}", "Election leaders changed."},
	} {
		if err := c.t.register(m, c.name, c.unit, c.desc); err != nil {
			return e, err
		}
	}
	var err error
	if e.apply, err = m.Float64Histogram("warden.raft.apply.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the leader proposing an entry to its own replica having applied it (measured on the leader's monotonic clock)."),
		metric.WithExplicitBucketBoundaries(applyBuckets...)); err != nil {
		return e, err
	}
	return e, nil
}

// causeSlot is c's slot in a cause tally.
func causeSlot(t *tally, c wire.Cause) int {
	if int(c) < otherCause && t.sets[c] != nil {
		return int(c)
	}
	return otherCause
}

// eventSub receives a replica's applied events. Send runs inside the
// replica's Update: counters only, nothing that blocks or allocates per
// event.
type eventSub struct {
	sm    *shardMetrics
	shard Replica
}

// Internal marks the tally's subscription as the node's own, not a watch.
func (es *eventSub) Internal() bool { return true }

func (es *eventSub) Send(events []wire.Event) bool {
	if !es.shard.IsLeader() || len(events) == 0 {
		return true
	}
	e := &es.sm.ev
	for i := range events {
		ev := &events[i]
		switch ev.Kind {
		case wire.EvAcquired:
			e.granted.add(causeSlot(e.granted, ev.Cause), 1)
		case wire.EvReleased:
			e.released.add(causeSlot(e.released, ev.Cause), 1)
		case wire.EvLease:
			e.leaseCreated.add(0, 1)
		case wire.EvLeaseEnd:
			e.leaseEnded.add(causeSlot(e.leaseEnded, ev.Cause), 1)
		case wire.EvLeader:
			e.electionChanges.add(0, 1)
		}
	}
	return true
}
