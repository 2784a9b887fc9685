package shard

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/wardenlock/warden/feed"
	"github.com/wardenlock/warden/lease"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// Config tunes every data shard of a node.
type Config struct {
	MaxBatchOps   int // client operations per Raft entry (default 2048)
	MaxBatchBytes int // bytes per Raft entry (default 512 KiB)
	MaxInflight   int // entries proposed but not yet applied (default 32)
	// QueueHold is the longest a blocking acquire on a path with queued
	// waiters is held back to join the next operation's entry (default
	// 2 ms; negative: never held; queuehold.go).
	QueueHold       time.Duration
	QueueDepth      int           // operations waiting to be batched (default 16384; a full queue blocks the sender)
	ProposalTimeout time.Duration // default 5 s
	ReadTimeout     time.Duration // default 5 s
	FeedSize        int           // events retained for watches (default 65536)
	// FeedBytes bounds the memory of the watch ring: its slots plus the
	// paths, owners and values of its events (default 4 MiB). Older
	// revisions come from the audit store when it is on.
	FeedBytes  int
	LessorTick time.Duration // how often deadlines are checked (default 20 ms)
	// CheckpointInterval is how often the leader records the time left on
	// leases that nobody keeps alive (default 250 ms; lease/checkpoint.go).
	CheckpointInterval time.Duration
	// LeaseAllowance is what a new leader adds to a checkpointed remaining
	// time, for clients to find it (default one election timeout; never
	// more than the lease's TTL in all).
	LeaseAllowance time.Duration
	// SnapshotLogBytes: a replica whose log grew by this many bytes of
	// entries since its last snapshot takes one (default 256 MiB; negative:
	// by entry count only; logbound.go).
	SnapshotLogBytes int64
}

// WithDefaults fills the zero fields of c with their defaults.
func (c Config) WithDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxBatchOps, 2048)
	def(&c.MaxBatchBytes, 512<<10)
	def(&c.MaxInflight, 32)
	if c.QueueHold == 0 {
		c.QueueHold = 2 * time.Millisecond
	}
	def(&c.QueueDepth, 16384)
	if c.SnapshotLogBytes == 0 {
		c.SnapshotLogBytes = DefaultSnapshotLogBytes
	}
	def(&c.FeedSize, 65536)
	def(&c.FeedBytes, 4<<20)
	if c.ProposalTimeout <= 0 {
		c.ProposalTimeout = 5 * time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 5 * time.Second
	}
	if c.LessorTick <= 0 {
		c.LessorTick = 20 * time.Millisecond
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = 250 * time.Millisecond
	}
	if c.LeaseAllowance <= 0 {
		c.LeaseAllowance = 150 * time.Millisecond
	}
	return c
}

// DefaultSnapshotLogBytes is Config.SnapshotLogBytes's default: a replica
// keeps at most about 1.25× this much log (replayed on restart at about
// 0.7 µs of CPU per operation, 100-300 bytes each), and under the heaviest
// load takes a snapshot every 15-20 s.
const DefaultSnapshotLogBytes = 256 << 20

// Shard is the local replica of one data shard.
type Shard struct {
	id        uint64
	replicaID uint64 // this node's id (leaders are tracked by node)
	rid       uint64 // the local replica's Raft id (placement.NodeOf(rid) = replicaID)
	node      ReplicaConfig
	nh        *dragonboat.NodeHost
	cfg       Config
	clock     lease.Clock
	log       *slog.Logger

	proposer *proposer
	lessor   *lease.Lessor
	timer    deadlineTimer
	parked   *parkedSet
	waits    waitCounts // queued waiters per path (queuehold.go)
	feed     *feed.Feed
	lost     lease.LostHolds // recent notices for holders, for keepalive answers (lease/lost.go)
	exports  exportCache     // export.go

	sm atomic.Pointer[statemachine.StateMachine] // the local replica's state machine

	csm   atomic.Pointer[concurrentSM] // what dragonboat runs: its snapshot counts
	bound *logBound                    // snapshots by log size (logbound.go)

	applyObs atomic.Pointer[func(time.Duration)] // SetApplyObserver

	leaderID  atomic.Uint64
	isLeader  atomic.Bool
	restoring atomic.Bool // waiting for its restore entry: clients are refused

	stopc chan struct{}
	wg    sync.WaitGroup
}

// ReplicaConfig is what a data shard's replica takes from its node.
type ReplicaConfig struct {
	Shard  uint64 // the shard's id
	NodeID uint64
	Config Config
	Clock  lease.Clock
	Log    *slog.Logger
	// Recorder, when set, receives every applied event (the node's audit
	// store) and serves watches their older history.
	Recorder Recorder
	// NamespaceDepth is the path depth ranges are cut at.
	NamespaceDepth int
	// Hint says where the shard's leader is, for a refused request.
	Hint func(shardID uint64) *wire.Hint
	// NodeHost runs the replica (its Raft group is started after New).
	NodeHost *dragonboat.NodeHost
}

// Recorder keeps applied events beyond the feed's ring: audit.Store.
type Recorder interface {
	// Record queues one entry's events; it must not block.
	Record(shard uint64, events []wire.Event)
	// History returns the shard's events from..to in order.
	History(shard, from, to uint64, limit int) ([]wire.Event, error)
}

// New makes a replica's shard; Start runs it once its Raft replica is
// started.
func New(rc ReplicaConfig) *Shard {
	id := rc.Shard
	s := &Shard{
		id:        id,
		replicaID: rc.NodeID,
		node:      rc,
		cfg:       rc.Config.WithDefaults(),
		clock:     rc.Clock,
		log:       rc.Log,
		nh:        rc.NodeHost,
		parked:    newParkedSet(),
		stopc:     make(chan struct{}),
	}
	s.bound = &logBound{limit: s.cfg.SnapshotLogBytes, request: s.requestLogSnapshot}
	s.feed = feed.New(s.cfg.FeedSize, s.cfg.FeedBytes)
	if rec := rc.Recorder; rec != nil {
		s.feed.History = func(from, to uint64, limit int) ([]wire.Event, error) {
			return rec.History(id, from, to, limit)
		}
	}
	s.lessor = lease.New(lease.Config{
		Shard: id, Log: s.log, Clock: s.clock,
		ReadTimeout: s.cfg.ReadTimeout, CheckpointInterval: s.cfg.CheckpointInterval, LeaseAllowance: s.cfg.LeaseAllowance,
		Stop:       s.stopc,
		Propose:    func(r *wire.Request, done func(*wire.Response)) { s.proposer.submit(r, wire.AnswerFunc(done)) },
		Read:       func(ctx context.Context, q any) (any, error) { return s.nh.SyncRead(ctx, s.id, q) },
		ReadFailed: func(id uint64, err error) *wire.Response { return ErrorResponse(id, err, false) },
		NotLeader:  s.notLeader,
		Lost:       &s.lost,
	})
	s.timer.s = s
	return s
}

// Start runs the proposer; the replica must be started. The host ticks
// every shard's lessor from one goroutine (Host.lessorLoop).
func (s *Shard) Start() {
	s.proposer = newProposer(s)
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.proposer.run() }()
}

func (s *Shard) Stop() {
	close(s.stopc)
	close(s.proposer.stop)
	s.wg.Wait()
	s.parked.drain(wire.Closed, "node is shutting down")
}

// LastTime is the local replica's last applied stamp (0 until it exists).
func (s *Shard) LastTime() int64 {
	if m := s.sm.Load(); m != nil {
		return m.LastTime()
	}
	return 0
}

// ID returns the shard id.
func (s *Shard) ID() uint64 { return s.id }

// IsLeader reports whether the local replica leads the shard.
func (s *Shard) IsLeader() bool { return s.isLeader.Load() }

// LeaderID returns the replica (= node) id of the leader, 0 when unknown.
func (s *Shard) LeaderID() uint64 { return s.leaderID.Load() }

func (s *Shard) OnLeader(leaderID, term uint64) {
	s.leaderID.Store(leaderID)
	isLeader := leaderID == s.replicaID
	if s.isLeader.Swap(isLeader) != isLeader {
		s.log.Info("shard leadership changed", "shard", s.id, "leader", leaderID, "local", isLeader, "term", term)
		if isLeader {
			s.waits.reset()
		}
		s.lessor.SetLeader(isLeader, term)
	}
}

// Applied implements statemachine.Observer. It runs inside Update.
func (s *Shard) Applied(index uint64, events []wire.Event) {
	if rec := s.node.Recorder; rec != nil {
		rec.Record(s.id, events)
	}
	s.feed.Append(events)
	s.lost.Observe(events, s.clock)
	s.lessor.OnEvents(events)
	for i := range events {
		ev := &events[i]
		s.waits.observe(ev)
		if ev.Client == 0 {
			continue
		}
		switch {
		case ev.Kind == wire.EvAcquired && ev.Cause == wire.CauseHandOff:
			s.parked.deliver(clientSeq{ev.Client, ev.Seq}, &wire.Response{
				Code: wire.OK, Token: ev.Token, Lease: ev.Lease, Mode: ev.Mode, Path: ev.Path, Count: 1,
			})
		case ev.Kind == wire.EvDequeued:
			// Withdrawn anywhere (a cancel through another node, the lease
			// ending): the request parked here is answered now.
			code := wire.Cancelled
			switch ev.Cause {
			case wire.CauseExpired, wire.CauseRevoked:
				code = wire.SessionExpired
			case wire.CauseMoved:
				// The range moved with the waiter in it: the retry finds
				// it queued (or granted) at the new owner.
				code = wire.RangeMoving
			}
			s.parked.deliver(clientSeq{ev.Client, ev.Seq}, &wire.Response{Code: code, Msg: "the wait ended: " + ev.Cause.String()})
		}
	}
}

// RangeDropped implements statemachine.RangeObserver: watches on the range
// end with RangeMoving (resume on the new owner).
func (s *Shard) RangeDropped(start, end string) {
	s.feed.EndRange(start, end, s.node.NamespaceDepth)
}

func (s *Shard) notLeader(id uint64) *wire.Response {
	return &wire.Response{ID: id, Code: wire.NotLeader, Msg: "this replica does not lead the shard",
		Hint: s.node.Hint(s.id)}
}

// Submit executes one request on this shard and calls done exactly once with
// its answer (possibly much later, for a blocking acquire).
func (s *Shard) Submit(req *wire.Request, done func(*wire.Response)) {
	s.SubmitTo(req, wire.AnswerFunc(done))
}

// SubmitTo is Submit answering to: a caller with an object per request
// passes it rather than a closure.
func (s *Shard) SubmitTo(req *wire.Request, to wire.Answerer) {
	if s.restoring.Load() && !req.Op.Internal() {
		to.Answer(&wire.Response{ID: req.ID, Code: wire.Unavailable, Msg: "the shard is being restored from a backup: retry shortly"})
		return
	}
	switch {
	case req.Op == wire.OpKeepAlive:
		s.lessor.KeepAlive(req, to.Answer)
	case req.Op == wire.OpExportRange:
		s.exportRange(req, to.Answer)
	case req.Op == wire.OpLeaderTransfer:
		s.transferLocal(req, to.Answer) // transfer.go
	case isRead(req.Op):
		s.read(req, to.Answer)
	case req.Op == wire.OpCancel:
		s.cancel(req, wire.Cancelled, func(r *wire.Response) { r.ID = req.ID; to.Answer(r) })
	case req.Op.Mutating():
		if req.Has(wire.FlagSigned) && (req.Op == wire.OpAcquire || req.Op == wire.OpCampaign) {
			to = &leaseTimeLeft{s: s, to: to}
		}
		s.propose(req, to)
	default:
		to.Answer(&wire.Response{ID: req.ID, Code: wire.UnknownOp, Msg: "unknown operation " + req.Op.String()})
	}
}

// leaseTimeLeft answers a grant that is to be signed (FlagSigned) with the
// time left on its lease in TTL, as this replica's lessor knows it when the
// answer arrives: the signature's expiry (router/sign.go) is bounded by it,
// never by a TTL the client sent. TTL is 0 when the lessor does not know
// the lease (this replica no longer leads the shard): no signature then.
type leaseTimeLeft struct {
	s  *Shard
	to wire.Answerer
}

func (a *leaseTimeLeft) Answer(resp *wire.Response) {
	if resp.Code == wire.OK && resp.Token != 0 {
		resp.TTL = 0
		if d, ok := a.s.lessor.Remaining(resp.Lease); ok && d > 0 {
			resp.TTL = d.Milliseconds()
		}
	}
	a.to.Answer(resp)
}

func isRead(op wire.Op) bool {
	switch op {
	case wire.OpLockInfo, wire.OpListLocks, wire.OpKVGet, wire.OpKVList, wire.OpLeader:
		return true
	}
	return false
}

func (s *Shard) propose(req *wire.Request, to wire.Answerer) {
	if s.worthPrecheck(req) {
		go func() {
			if resp := s.precheck(req); resp != nil {
				to.Answer(resp)
				return
			}
			s.proposeChecked(req, to)
		}()
		return
	}
	s.proposeChecked(req, to)
}

// worthPrecheck: an acquire on the leader of a shard whose replica has come
// near a limit (statemachine/precheck.go) is checked before it is proposed.
func (s *Shard) worthPrecheck(req *wire.Request) bool {
	if req.Op != wire.OpAcquire && req.Op != wire.OpCampaign || !s.IsLeader() {
		return false
	}
	m := s.sm.Load()
	return m != nil && m.Crowded()
}

// precheck asks the local replica whether req is over a limit; it returns
// the refusal, or nil to propose (also when the lookup itself fails: the
// state machine decides then).
func (s *Shard) precheck(req *wire.Request) *wire.Response {
	v, err := s.nh.StaleRead(s.id, statemachine.LimitCheck{Req: req})
	if err != nil {
		return nil
	}
	res, ok := v.(statemachine.LimitResult)
	if !ok || res.Err == nil {
		return nil
	}
	prechecked.Add(1)
	return &wire.Response{ID: req.ID, Code: res.Err.Code, Msg: res.Err.Detail}
}

// prechecked counts requests refused before they were proposed.
var prechecked atomic.Int64

// PrecheckRefusals returns how many requests this process refused for a
// limit before proposing them.
func PrecheckRefusals() int64 { return prechecked.Load() }

func (s *Shard) proposeChecked(req *wire.Request, to wire.Answerer) {
	blocking := (req.Op == wire.OpAcquire || req.Op == wire.OpCampaign) && req.Wait != wire.WaitNone
	if !blocking {
		s.proposer.submit(req, to)
		return
	}
	if req.Client == 0 {
		to.Answer(&wire.Response{ID: req.ID, Code: wire.InvalidArgument, Msg: "a waiting acquire needs a client id and sequence number"})
		return
	}
	p := &parkedReq{s: s, key: clientSeq{req.Client, req.Seq}, path: req.Path, id: req.ID, wait: req.Wait, to: to}
	s.parked.add(p.key, p)
	s.proposer.submit(req, p) // parkedReq.Answer
}

// cancelWait withdraws a queued request whose wait ran out. If a grant won
// the race, the caller gets the grant.
func (s *Shard) cancelWait(key clientSeq, path string) {
	s.cancel(&wire.Request{Op: wire.OpCancel, Path: path, Client: key.client, Seq: key.seq}, wire.Timeout, nil)
}

// cancel proposes the withdrawal req (OpCancel naming the request by
// Client and Seq, and by its path, so that a request not applied yet is
// withdrawn ahead of its arrival): its parked caller is answered with
// code, or with the grant if the grant came first. done, if not nil,
// receives the cancel's own answer: OK with the token when the request had
// been granted (the lock is held and must be released), OK without one
// when it holds nothing.
func (s *Shard) cancel(req *wire.Request, code wire.Code, done func(*wire.Response)) {
	client, seq := req.Client, req.Seq
	key := clientSeq{client, seq}
	req = &wire.Request{Op: wire.OpCancel, Path: req.Path, Paths: req.Paths, Lease: req.Lease, Owner: req.Owner,
		Client: client, Seq: seq, Trace: req.Trace}
	s.proposer.submit(req, wire.AnswerFunc(func(resp *wire.Response) {
		switch {
		case resp.Code == wire.OK && resp.Token != 0:
			s.parked.deliver(key, &wire.Response{Code: wire.OK, Token: resp.Token, Lease: resp.Lease,
				Mode: resp.Mode, Path: resp.Path, Count: 1})
		case resp.Code == wire.Cancelled || resp.Code == wire.OK || resp.Code == wire.NotFound:
			s.parked.deliver(key, &wire.Response{Code: code, Msg: "the wait ended without a grant"})
		default:
			// Unknown outcome (no quorum, timeout): try again while the
			// caller is still parked; a grant or the retry answers it.
			if done == nil && s.parked.has(key) {
				time.AfterFunc(200*time.Millisecond, func() { s.cancel(req, code, nil) })
			}
		}
		if done != nil {
			done(resp)
		}
	}))
}

func (s *Shard) read(req *wire.Request, done func(*wire.Response)) {
	if span := s.traceSpan("read", req); span != nil {
		done = spanDone(span, done)
	}
	go func() {
		var (
			v   any
			err error
		)
		if req.Has(wire.FlagStale) {
			v, err = s.nh.StaleRead(s.id, req)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ReadTimeout)
			v, err = s.nh.SyncRead(ctx, s.id, req)
			cancel()
		}
		if err != nil {
			done(ErrorResponse(req.ID, err, false))
			return
		}
		resp, ok := v.(*wire.Response)
		if !ok {
			done(&wire.Response{ID: req.ID, Code: wire.Internal, Msg: "unexpected read result"})
			return
		}
		resp.ID = req.ID
		s.fillTTLs(resp)
		done(resp)
	}()
}

// fillTTLs adds the time left on each holder's lease when this replica's
// lessor knows it (it does on the leader).
func (s *Shard) fillTTLs(resp *wire.Response) {
	for i := range resp.Holders {
		if d, ok := s.lessor.Remaining(resp.Holders[i].Lease); ok {
			resp.Holders[i].TTL = d.Milliseconds()
		}
	}
}

// Watch subscribes to this shard's events on path (or under it, with
// prefix) from revision rev (0 = from now). It returns the subscription id
// and the revision the watch starts after.
func (s *Shard) Watch(path string, prefix bool, rev uint64, sub feed.Subscriber) (uint64, uint64, error) {
	id, last, err := s.feed.Subscribe(path, prefix, rev, sub)
	if ge, ok := err.(*feed.GapError); ok {
		ge.Shard = s.id
	}
	return id, last, err
}

// Unwatch ends a subscription.
func (s *Shard) Unwatch(id uint64) { s.feed.Unsubscribe(id) }

// Watchers returns the number of clients' watch subscriptions.
func (s *Shard) Watchers() int { return s.feed.Watchers() }

// ProposalStats reports the proposer's queue: client operations waiting to
// be batched, entries proposed and not yet answered, and entries that did
// not complete since start (dropped without a leader, timed out, rejected).
func (s *Shard) ProposalStats() (queued int, pending int64, failed uint64) {
	p := s.proposer
	if p == nil {
		return 0, 0, 0
	}
	return len(p.in), p.pending.Load(), p.failed.Load()
}

// SetApplyObserver installs (nil: removes) fn, called with the time from
// proposing each entry to having it applied by the local replica, for
// entries this replica proposed while it led the shard. It runs on the
// proposer's answer path: cheap, never blocking.
func (s *Shard) SetApplyObserver(fn func(time.Duration)) {
	if fn == nil {
		s.applyObs.Store(nil)
		return
	}
	s.applyObs.Store(&fn)
}

// AppliedIndex is the local replica's last applied entry index.
func (s *Shard) AppliedIndex() uint64 {
	if m := s.sm.Load(); m != nil {
		return m.AppliedIndex()
	}
	return 0
}

// Batches reports how many Raft entries this replica has proposed and how
// many client operations they carried: their ratio is the batching the
// proposer achieves (operations per entry).
func (s *Shard) Batches() (entries, ops uint64) {
	if s.proposer == nil {
		return 0, 0
	}
	return s.proposer.entries.Load(), s.proposer.ops.Load()
}

// recoveredTo runs when the local replica's state was replaced by a
// snapshot at revision rev (at start, or the leader's when it fell behind
// the compacted log): the events up to rev were never applied here, so
// the watch feed skips to it (feed.Skip).
func (s *Shard) recoveredTo(rev uint64) {
	s.log.Info("replica recovered from a snapshot", "shard", s.id, "revision", rev)
	s.feed.Skip(rev)
}

// Snapshots is the snapshots the local replica saved and recovered its
// state from since the process started.
func (s *Shard) Snapshots() (saved, recovered uint64) {
	if c := s.csm.Load(); c != nil {
		return c.saved.Load(), c.recovered.Load()
	}
	return 0, 0
}

// RID is the local replica's Raft id.
func (s *Shard) RID() uint64 { return s.rid }

// SetRID records the local replica's Raft id (before Start).
func (s *Shard) SetRID(rid uint64) { s.rid = rid }

// NewStateMachine makes the replica's state machine for dragonboat: cfg's
// state machine, observed by s, whose snapshots make rec durable first
// when it can (durable.go).
func (s *Shard) NewStateMachine(cfg statemachine.Config, rec Recorder) sm.IConcurrentStateMachine {
	m := statemachine.New(cfg)
	m.SetObserver(s)
	s.sm.Store(m)
	c := &concurrentSM{sm: m, log: s.log, bound: s.bound, onRecover: s.recoveredTo}
	s.csm.Store(c)
	if d, ok := rec.(Durabler); ok {
		c.rec = d
	}
	return c
}

// Tick checks the shard's lease deadlines and its revocation and
// lock-delay timers (the node ticks every shard from one goroutine).
func (s *Shard) Tick() {
	s.lessor.Tick()
	s.timer.tick()
}

// SetRestoring says whether the shard waits for its restore entry (clients
// are refused meanwhile).
func (s *Shard) SetRestoring(on bool) { s.restoring.Store(on) }

// Restoring says whether the shard waits for its restore entry.
func (s *Shard) Restoring() bool { return s.restoring.Load() }

// Restored implements statemachine.RestoreObserver: the shard's state was
// replaced, so a leading lessor starts over from the restored lease table
// (every restored lease gets a full TTL from now).
func (s *Shard) Restored(index uint64) {
	if s.isLeader.Load() {
		s.lessor.SetLeader(true, s.lessor.Term())
	}
}

// EndWatches ends every watch of the shard's feed with code and msg.
func (s *Shard) EndWatches(code wire.Code, msg string) { s.feed.EndAll(code, msg) }
