package statemachine

import (
	"bytes"
	"fmt"
	"sync/atomic"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/wardenlock/warden/wire"
)

var (
	_ sm.IStateMachine = (*StateMachine)(nil)
	_ sm.IHash         = (*StateMachine)(nil)
)

// StateMachine is one shard's deterministic lock state machine. It is not
// safe for concurrent use; dragonboat serialises Update, Lookup and the
// snapshot calls of one replica.
type StateMachine struct {
	cfg      Config
	observer Observer
	state
	lastTime  atomic.Int64  // mirrors now for readers outside Update (LastTime)
	lastIndex atomic.Uint64 // mirrors applied (AppliedIndex)
	crowded   crowdedFlag   // a local hint for pre-proposal limit checks (precheck.go)

	// Scratch reused across entries; nothing here is replicated.
	reqs    []wire.Request
	events  []wire.Event
	grants  []wire.Grant
	rd      bytes.Reader
	dec     *msgpack.Decoder
	out     []byte
	hand    handoffScratch
	changed []*lockNode
	queued  *waiter // the waiter the current op queued, for its dedup record
	// newLease is the session lease the current op created (useLease), to
	// be taken back if the op is refused (quotas.go).
	newLease *lease
	// routed is the current op's path once routeCheck has found it valid,
	// owned (by range routedAt) and not frozen; "" otherwise.
	routed   string
	routedAt int
	// freeRecs holds dedup records the ack floor dropped, for remember to
	// reuse (dedup.go): one allocation fewer per deduplicated op.
	freeRecs []*outcome

	timersChanged bool         // a revocation deadline or lock-delay was added or removed
	nextDeadline  atomic.Int64 // earliest of them (NextDeadline)
	// rangeOps counts applied ops per owned range (parallel to ranges):
	// load figures for placement, not replicated.
	rangeOps []uint64
}

// New returns an empty state machine. Zero fields of cfg take their defaults;
// callers should check cfg.Validate first.
func New(cfg Config) *StateMachine {
	s := &StateMachine{cfg: cfg.withDefaults(), state: newState()}
	s.dec = msgpack.NewDecoder(&s.rd)
	return s
}

// SetObserver installs the hook that sees every entry's events. Call it
// before the replica starts.
func (s *StateMachine) SetObserver(o Observer) { s.observer = o }

// Update applies one Raft entry: a batch of client operations stamped with
// the leader's clock. It never returns an error: undecodable entries and bad
// operations are answered with typed error codes in the result.
func (s *StateMachine) Update(e sm.Entry) (sm.Result, error) {
	s.applied = e.Index
	s.lastIndex.Store(e.Index)
	// Between entries no scratch or op holds a node the last entry pruned,
	// so the trie may hand them out again.
	s.trie.Recycle()
	if len(e.Cmd) > 1 && e.Cmd[0] == commandVersion && e.Cmd[1] == kindRestore {
		return s.applyRestore(e), nil
	}
	s.events = s.events[:0]
	now, err := s.decodeCommand(e.Cmd)
	if err != nil {
		bad := wire.Response{Code: wire.Malformed, Msg: err.Error()}
		return sm.Result{Value: 0, Data: s.encodeResults([]wire.Response{bad})}, nil
	}
	s.advance(now)
	s.beginResults(len(s.reqs))
	for i := range s.reqs {
		var resp wire.Response
		s.applyOne(&s.reqs[i], &resp)
		s.appendResult(&resp)
	}
	if s.timersChanged {
		s.timersChanged = false
		s.nextDeadline.Store(s.computeNextDeadline())
	}
	if s.observer != nil && len(s.events) > 0 {
		s.observer.Applied(e.Index, s.events)
	}
	return sm.Result{Value: uint64(len(s.reqs)), Data: bytes.Clone(s.out)}, nil
}

// advance moves stamped time forward (never back: leaders' clocks differ)
// and drops what has aged out.
func (s *StateMachine) advance(now int64) {
	s.now = max(s.now, now)
	s.lastTime.Store(s.now)
	s.sweepTombstones()
	s.sweepClients()
}

// AppliedIndex is the index of the last applied entry; safe from any
// goroutine.
func (s *StateMachine) AppliedIndex() uint64 { return s.lastIndex.Load() }

// LastTime is the stamped time of the last applied entry (unix ms; 0 before
// the first). Safe to call from any goroutine: the proposer anchors its
// stamps on it, so no leader's wall clock can move replicated time.
func (s *StateMachine) LastTime() int64 { return s.lastTime.Load() }

// NextDeadline is the stamped time (unix ms) of the earliest pending
// revocation deadline or lock-delay end, 0 when there is none. Safe from
// any goroutine: the shard leader's timer proposes OpDeadlines once
// replicated time reaches it.
func (s *StateMachine) NextDeadline() int64 { return s.nextDeadline.Load() }

// applyOne runs one op. Ops validate before they mutate, so a refused op
// changes nothing (TestRefusedOpsLeaveStateUntouched). A panic is a bug
// that may have left the op half-applied: it is not answered and carried
// past but stops the replica, naming the entry and the op, so no replica
// serves a state that no log order produces.
func (s *StateMachine) applyOne(r *wire.Request, out *wire.Response) {
	defer func() {
		s.routed = "" // the op's route check holds for that op only
		if p := recover(); p != nil {
			panic(fmt.Sprintf("statemachine: shard %d entry %d: %v %q: %v", s.cfg.ShardID, s.applied, r.Op, r.Path, p))
		}
	}()
	s.apply(r, out)
}

// Rev is the revision of the newest event (the replica's lock must keep
// applies out: dragonboat's for a regular state machine, concurrentSM's
// for a data shard's).
func (s *StateMachine) Rev() uint64 { return s.rev }

// Close releases nothing: the state machine holds no files or goroutines.
func (s *StateMachine) Close() error { return nil }

// emit appends an event with the next revision and returns that revision.
func (s *StateMachine) emit(ev wire.Event) uint64 {
	s.rev++
	ev.Rev = s.rev
	ev.Shard = s.cfg.ShardID
	ev.Time = s.now
	s.events = append(s.events, ev)
	return s.rev
}
