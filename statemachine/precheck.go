package statemachine

import (
	"sync/atomic"

	"github.com/wardenlock/warden/wire"
)

// Pre-proposal limit checks. The limits on locks per lease and waiters per
// lock are decided when an entry is applied, on every replica: that is the
// authoritative check. But a request the state machine will refuse need not
// cost a Raft round trip, so the shard leader asks first (LimitCheck, a
// read-only Lookup on its local replica) and refuses an over-limit acquire
// itself. The local replica may lag the log by the entries in flight, so the
// answer can be stale in both directions; a request that slips through is
// still refused at apply time.
//
// The lookup takes the replica's read lock, so it is asked only once some
// lease or lock of the shard has come within half of its limit (Crowded):
// a shard far from its limits pays nothing.

// LimitCheck (Lookup) returns LimitResult for an Acquire or Campaign.
type LimitCheck struct{ Req *wire.Request }

// LimitResult is nil Err when the request is within the limits as far as
// the local replica knows, or the TooMany error apply would return.
type LimitResult struct{ Err *wire.Error }

// crowded is set (and never cleared) once a lease or a lock path has come
// within half of its limit on this replica.
type crowdedFlag struct{ atomic.Bool }

// Crowded reports whether pre-proposal limit checks are worth their lookup
// on this replica (safe to call from any goroutine).
func (s *StateMachine) Crowded() bool { return s.crowded.Load() }

// noteLoad marks the replica crowded when a lease or a queue passes half of
// its limit. It runs inside Update; it only sets a local hint, never state.
func (s *StateMachine) noteLoad(l *lease, n *lockNode) {
	if s.crowded.Load() {
		return
	}
	if l != nil && 2*(len(l.holders)+len(l.waiters)) >= s.cfg.MaxLeaseLock ||
		n != nil && 2*int(n.Queued()) >= s.cfg.MaxWaiters {
		s.crowded.Store(true)
	}
}

// precheck mirrors opAcquire's decisions up to its limit checks, without
// changing anything: TooMany when apply would refuse r for a limit.
func (s *StateMachine) precheck(r *wire.Request) *wire.Error {
	if r.Op != wire.OpAcquire && r.Op != wire.OpCampaign {
		return nil
	}
	if c := s.clients[r.Client]; r.Client != 0 && c != nil && c.record(r.Seq) != nil {
		// A retry (a client re-attaching to its queued acquire, say):
		// apply answers it from its record, it takes no new slot.
		return nil
	}
	mode := r.Mode
	if r.Op == wire.OpCampaign {
		mode = wire.Exclusive
	}
	var l *lease
	if r.Lease != 0 {
		l = s.leases[r.Lease]
		if l != nil && checkOwner(l, r) != nil {
			return nil // apply refuses it as Unauthorized
		}
	}
	n := s.trie.Find(r.Path)
	if n != nil && ownHold(n, r.Lease, r.Owner) != nil {
		return nil // re-entry: no new lock
	}
	if l != nil && len(l.holders)+len(l.waiters) >= s.cfg.MaxLeaseLock {
		return wire.Errorf(wire.TooMany, "lease %x holds or waits for %d locks", l.id, s.cfg.MaxLeaseLock)
	}
	if n == nil || r.Wait == wire.WaitNone || int(n.Queued()) < s.cfg.MaxWaiters {
		return nil
	}
	above, at, below := n.HeldConflicts(mode)
	if above+at+below == 0 && !n.QueuedConflict(mode) {
		return nil // granted at once, not queued
	}
	if above+at+below > 0 && s.selfConflict(n, mode, l, r.Owner, at) {
		return nil
	}
	return wire.Errorf(wire.TooMany, "%s already has %d waiters", r.Path, s.cfg.MaxWaiters)
}
