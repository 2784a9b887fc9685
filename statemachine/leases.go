package statemachine

import (
	"github.com/wardenlock/warden/internal/testbugs"
	"github.com/wardenlock/warden/wire"
)

// checkTTL refuses lease TTLs outside the configured bounds.
func (s *StateMachine) checkTTL(ttl int64) *wire.Error {
	if ttl < s.cfg.MinTTL || ttl > s.cfg.MaxTTL {
		return wire.Errorf(wire.InvalidArgument, "ttl %d ms is outside [%d, %d] ms", ttl, s.cfg.MinTTL, s.cfg.MaxTTL)
	}
	return nil
}

// useLease returns the session lease r.Lease, creating it on first use
// (bound to r.Identity, which must then prove the id with r.LeaseKey). A
// TTL sent with an existing lease must be within bounds too. An
// id that ended recently is refused, so a late request of an expired
// session cannot resurrect it; a lease bound to another identity is refused
// as Unauthorized.
func (s *StateMachine) useLease(r *wire.Request) (*lease, *wire.Error) {
	id, ttl := r.Lease, r.TTL
	if id&SingleLeaseBit != 0 {
		return nil, wire.Errorf(wire.InvalidArgument, "lease id %#x has the single-lock bit set", id)
	}
	if l := s.leases[id]; l != nil {
		if err := checkOwner(l, r); err != nil {
			return nil, err
		}
		if ttl != 0 {
			// The lease keeps the TTL it was created with, but a TTL that is
			// sent is held to the same bounds (0: none sent, as kv.put does).
			if err := s.checkTTL(ttl); err != nil {
				return nil, err
			}
		}
		return l, nil
	}
	if _, gone := s.tombs[id]; gone {
		return nil, wire.Errorf(wire.SessionExpired, "lease %x has ended", id)
	}
	if err := checkLeaseKey(r); err != nil {
		return nil, err
	}
	if err := s.checkTTL(ttl); err != nil {
		return nil, err
	}
	t := s.tenantOf(r.Identity)
	if err := s.quotaForLease(t); err != nil {
		return nil, err
	}
	l := &lease{id: id, ttl: ttl, owner: internIdentity(r.Identity), ten: t}
	l.rev = s.emit(wire.Event{Kind: wire.EvLease, Lease: id, TTL: ttl})
	s.leases[id] = l
	if t != nil {
		t.leases++
	}
	s.newLease = l // taken back if the op is refused (exec)
	return l, nil
}

// opSession creates a session lease explicitly (or confirms it exists).
func (s *StateMachine) opSession(r *wire.Request, out *wire.Response) *wire.Error {
	if r.Lease == 0 {
		return wire.Errorf(wire.InvalidArgument, "a session needs a non-zero lease id")
	}
	l, err := s.useLease(r)
	if err != nil {
		return err
	}
	out.Lease, out.TTL = l.id, l.ttl
	return nil
}

// opRenew sets the TTL of a single-lock lease, named by its lock.
func (s *StateMachine) opRenew(r *wire.Request, out *wire.Response) *wire.Error {
	if err := s.checkPath(r.Path); err != nil {
		return err
	}
	_, h, err := s.tokenHolder(r)
	if err != nil {
		return err
	}
	if !h.single {
		return wire.Errorf(wire.InvalidArgument, "%s is held by session lease %x: keep the session alive instead", r.Path, h.lw)
	}
	if err := s.checkTTL(r.TTL); err != nil {
		return err
	}
	s.dropCheckpoint(h.leaseID())
	rev := s.emit(wire.Event{Kind: wire.EvRenewed, Path: r.Path, Token: h.token, Lease: h.leaseID(), TTL: r.TTL})
	h.setSingle(r.TTL, rev)
	out.Token, out.Lease, out.TTL, out.Mode, out.Count = h.token, h.leaseID(), r.TTL, h.mode, h.count
	return nil
}

// opEndLease revokes or expires a lease. Unknown ids are a no-op: the
// lessor may propose an expiry twice.
func (s *StateMachine) opEndLease(r *wire.Request, out *wire.Response, cause wire.Cause) *wire.Error {
	if r.Lease == 0 {
		return wire.Errorf(wire.InvalidArgument, "no lease id")
	}
	out.Lease = r.Lease
	if r.Op == wire.OpExpire && r.Term != 0 && r.Term < s.maxTerm {
		// A deposed leader (paused, then resumed) still believes its
		// deadlines; its proposal can reach the log through the new leader,
		// which has been acknowledging keepalives. Only the lessor of the
		// latest term decides expiries.
		return wire.Errorf(wire.Conflict, "expiry of lease %x was decided in term %d, superseded by term %d",
			r.Lease, r.Term, s.maxTerm)
	}
	if r.Lease&SingleLeaseBit != 0 {
		h := s.single(r.Lease)
		if h == nil {
			return nil
		}
		if r.Op == wire.OpRevoke && r.Identity != "" {
			// Single-lock leases are not bound to an identity; with auth
			// on they end only with their lock (release needs the path,
			// the token and lock permission on the path).
			return wire.Errorf(wire.Unauthorized, "lease %#x is a single-lock lease: release its lock with its token instead", r.Lease)
		}
		if staleExpiry(r, h.singleRev()) {
			return renewedSince(r)
		}
		if err := s.nodeFrozen(h.node); err != nil {
			return err
		}
		s.endSingle(h, cause)
		return nil
	}
	l := s.leases[r.Lease]
	if l == nil {
		return nil
	}
	if err := checkOwner(l, r); err != nil {
		return err
	}
	if staleExpiry(r, l.rev) {
		return renewedSince(r)
	}
	if err := s.leaseFrozen(l); err != nil {
		return err
	}
	changed := s.changed[:0]
	// Waiters go first so that the hand-off below never grants to them.
	for len(l.waiters) > 0 && !testbugs.GrantExpiredWaiter { // test-only switch
		w := l.waiters[len(l.waiters)-1]
		s.dropWaiter(w, cause)
		changed = append(changed, w.node)
	}
	for len(l.holders) > 0 {
		h := l.holders[len(l.holders)-1]
		changed = append(changed, h.node)
		s.endHold(h, cause, "", nil)
	}
	for len(l.keys) > 0 {
		n := l.keys[len(l.keys)-1]
		s.deleteKV(n, "", cause)
		changed = append(changed, n)
	}
	delete(s.leases, l.id)
	if l.ten != nil {
		l.ten.leases--
	}
	s.dropCheckpoint(l.id)
	s.bury(l.id)
	s.emit(wire.Event{Kind: wire.EvLeaseEnd, Cause: cause, Lease: l.id})
	s.settle(changed)
	return nil
}

// settle hands the changed nodes' locks to their waiters, tidies the nodes
// and gives the scratch slice back (s.changed) for the next command.
func (s *StateMachine) settle(changed []*lockNode) {
	s.handoff(changed...)
	for _, n := range changed {
		s.tidy(n)
	}
	clear(changed)
	s.changed = changed[:0]
}

// staleExpiry: an Expire carries the revision at which the lessor last saw
// the lease created or renewed. A renewal applied after that (one already in
// flight when the deadline passed) makes the expiry stale, so an
// acknowledged renewal is never undone by an older decision.
func staleExpiry(r *wire.Request, rev uint64) bool {
	return r.Op == wire.OpExpire && r.Rev != 0 && rev > r.Rev
}

func renewedSince(r *wire.Request) *wire.Error {
	return wire.Errorf(wire.Conflict, "lease %x was renewed after revision %d: expiry skipped", r.Lease, r.Rev)
}

// single returns the holder of a single-lock lease id, or nil.
func (s *StateMachine) single(id uint64) *holder {
	if id&SingleLeaseBit == 0 {
		return nil
	}
	return s.singles.get(id &^ SingleLeaseBit)
}

func (s *StateMachine) endSingle(h *holder, cause wire.Cause) {
	n, id := h.node, h.leaseID()
	s.endHold(h, cause, "", nil)
	s.bury(id)
	s.handoff(n)
	s.tidy(n)
}

// bury tombstones an ended lease id.
func (s *StateMachine) bury(id uint64) {
	s.tombs[id] = s.now
	s.tombList = append(s.tombList, tomb{id: id, at: s.now})
}

// sweepTombstones forgets ids that ended more than TombstoneMs ago. Time
// only moves forward, so the list is in expiry order.
func (s *StateMachine) sweepTombstones() {
	for s.tombHead < len(s.tombList) {
		t := s.tombList[s.tombHead]
		if t.at+s.cfg.TombstoneMs > s.now {
			break
		}
		if at, ok := s.tombs[t.id]; ok && at == t.at {
			delete(s.tombs, t.id)
		}
		s.tombHead++
	}
	if s.tombHead > 64 && s.tombHead*2 > len(s.tombList) {
		s.tombList = append(s.tombList[:0], s.tombList[s.tombHead:]...)
		s.tombHead = 0
	}
}

func (l *lease) addHolder(h *holder) {
	h.leaseIdx = uint32(len(l.holders))
	l.holders = append(l.holders, h)
}

func (l *lease) removeHolder(h *holder) {
	i, last := h.leaseIdx, len(l.holders)-1
	moved := l.holders[last]
	l.holders[i], moved.leaseIdx = moved, i
	l.holders[last] = nil
	l.holders = shrink(l.holders[:last])
}

func (l *lease) addWaiter(w *waiter) {
	w.leaseIdx = uint32(len(l.waiters))
	l.waiters = append(l.waiters, w)
}

func (l *lease) removeWaiter(w *waiter) {
	i, last := w.leaseIdx, len(l.waiters)-1
	moved := l.waiters[last]
	l.waiters[i], moved.leaseIdx = moved, i
	l.waiters[last] = nil
	l.waiters = shrink(l.waiters[:last])
}

func (l *lease) addKey(n *lockNode) {
	n.Val.ext.kv.leaseIdx = uint32(len(l.keys))
	l.keys = append(l.keys, n)
}

func (l *lease) removeKey(n *lockNode) {
	i, last := n.Val.ext.kv.leaseIdx, len(l.keys)-1
	moved := l.keys[last]
	l.keys[i], moved.Val.ext.kv.leaseIdx = moved, i
	l.keys[last] = nil
	l.keys = shrink(l.keys[:last])
}

// shrink returns memory after a lease let go of most of its entries.
func shrink[E any](v []E) []E {
	if cap(v) > 64 && len(v) < cap(v)/4 {
		return append(make([]E, 0, len(v)*2), v...)
	}
	return v
}
