package statemachine

import (
	"github.com/wardenlock/warden/wire"
)

// Quotas per identity. With auth on, what one identity holds on a shard is
// bounded: its leases (MaxOwnerLeases: session leases, and single-lock
// leases held or queued), its locks (MaxOwnerLocks: holds and queued
// requests, since a queued one becomes a hold without asking again) and
// its queued requests (MaxOwnerWaiters). A request that would pass one is
// refused with TooMany and changes nothing.
//
// The counts are derived from replicated state (the identity a session
// lease, a single-lock hold or a queued single-lock acquire is bound to),
// updated as entries apply and recounted on recovery, so every replica
// decides alike; they are not in snapshots. They are per shard: an
// identity may hold up to the quota on every shard. State a range move
// brings in is installed whatever the destination's counts (the holds
// exist already); the identity's next requests there are refused until it
// is back under its quotas.

// tenant is what one identity holds on this shard.
type tenant struct {
	name        string
	leases      int // session leases
	singleHolds int // single-lock leases held
	singleWaits int // queued single-lock acquires (each becomes a lease)
	holds       int
	waiters     int
}

func (t *tenant) leaseCount() int { return t.leases + t.singleHolds + t.singleWaits }

// tenantOf returns identity's counts ("" → nil: no quotas). The last one is
// kept at hand: the entries of a batch mostly come from few identities.
func (s *StateMachine) tenantOf(identity string) *tenant {
	if identity == "" {
		return nil
	}
	if t := s.lastTenant; t != nil && t.name == identity {
		return t
	}
	t := s.tenants[identity]
	if t == nil {
		t = &tenant{name: internIdentity(identity)}
		s.tenants[t.name] = t
	}
	s.lastTenant = t
	return t
}

// quotaForLease refuses a new lease (a session, or a single-lock lease held
// or queued) to t over MaxOwnerLeases.
func (s *StateMachine) quotaForLease(t *tenant) *wire.Error {
	if t == nil || t.leaseCount() < s.cfg.MaxOwnerLeases {
		return nil
	}
	return wire.Errorf(wire.TooMany, "identity %q has %d leases on shard %d (quota %d): end some first",
		t.name, t.leaseCount(), s.cfg.ShardID, s.cfg.MaxOwnerLeases)
}

// quotaForLocks refuses n new holds or queued requests to t over
// MaxOwnerLocks, and (queue) a queued one over MaxOwnerWaiters.
func (s *StateMachine) quotaForLocks(t *tenant, n int, queue bool) *wire.Error {
	if t == nil {
		return nil
	}
	if t.holds+t.waiters+n > s.cfg.MaxOwnerLocks {
		return wire.Errorf(wire.TooMany, "identity %q holds or waits for %d locks on shard %d (quota %d)",
			t.name, t.holds+t.waiters, s.cfg.ShardID, s.cfg.MaxOwnerLocks)
	}
	if queue && t.waiters >= s.cfg.MaxOwnerWaiters {
		return wire.Errorf(wire.TooMany, "identity %q has %d queued requests on shard %d (quota %d)",
			t.name, t.waiters, s.cfg.ShardID, s.cfg.MaxOwnerWaiters)
	}
	return nil
}

// requestTenant is the identity r's new hold or wait counts against: its
// session lease's owner, or r's own identity for a single-lock acquire.
func (s *StateMachine) requestTenant(r *wire.Request, l *lease) *tenant {
	if l != nil {
		return l.ten
	}
	return s.tenantOf(singleIdentity(r))
}

// countHold adds (delta 1) or removes (-1) a hold of t.
func (t *tenant) countHold(single bool, delta int) {
	if t != nil {
		add(&t.holds, &t.singleHolds, single, delta)
	}
}

// countWait adds (delta 1) or removes (-1) a queued request of t.
func (t *tenant) countWait(single bool, delta int) {
	if t != nil {
		add(&t.waiters, &t.singleWaits, single, delta)
	}
}

func add(all, singles *int, single bool, delta int) {
	*all += delta
	if single {
		*singles += delta
	}
}

// holdTenant is the identity holder h counts against (nil: unbound).
func (s *StateMachine) holdTenant(h *holder) *tenant {
	return s.boundTenant(h.single, h.lw, s.singleOwn, h.token)
}

// waitTenant is the identity waiter w counts against (nil: unbound).
func (s *StateMachine) waitTenant(w *waiter) *tenant {
	return s.boundTenant(w.lease == 0, w.lease, s.waitOwn, w.arrival)
}

// boundTenant is the identity a hold or a wait is bound to: a single-lock
// one's in own (by key), a session one's lease owner.
func (s *StateMachine) boundTenant(single bool, lease uint64, own map[uint64]string, key uint64) *tenant {
	if single {
		if len(own) == 0 {
			return nil
		}
		return s.tenantOf(own[key])
	}
	if l := s.leases[lease]; l != nil {
		return l.ten
	}
	return nil
}

// recountTenants rebuilds every identity's counts from the state (after a
// recovery): from the leases' own lists and the single-lock owner tables,
// without walking the trie (nothing at all without identities).
func (s *StateMachine) recountTenants() {
	s.tenants, s.lastTenant = map[string]*tenant{}, nil
	for _, l := range s.leases {
		if l.ten = s.tenantOf(l.owner); l.ten != nil {
			l.ten.leases++
			l.ten.holds += len(l.holders)
			l.ten.waiters += len(l.waiters)
		}
	}
	for _, id := range s.singleOwn {
		s.tenantOf(id).countHold(true, 1)
	}
	for _, id := range s.waitOwn {
		s.tenantOf(id).countWait(true, 1)
	}
}

// dropNewLease undoes the creation of the session lease a refused request
// made (useLease), so a refused acquire, campaign, multi-lock or put leaves
// no lease behind. Its creation event is taken back when nothing came after
// it; otherwise the lease is ended like a revoked one.
func (s *StateMachine) dropNewLease() {
	l := s.newLease
	s.newLease = nil
	if l == nil || s.leases[l.id] != l || len(l.holders)+len(l.waiters)+len(l.keys) > 0 {
		return
	}
	delete(s.leases, l.id)
	if l.ten != nil {
		l.ten.leases--
	}
	if n := len(s.events); n > 0 && s.events[n-1].Rev == l.rev && s.rev == l.rev {
		s.events = s.events[:n-1]
		s.rev--
		return
	}
	s.emit(wire.Event{Kind: wire.EvLeaseEnd, Cause: wire.CauseRevoked, Lease: l.id})
}

// grantQuota refuses a direct grant to r over its identity's quotas.
func (s *StateMachine) grantQuota(r *wire.Request, l *lease) *wire.Error {
	t := s.requestTenant(r, l)
	if err := s.quotaForLocks(t, 1, false); err != nil {
		return err
	}
	if l == nil {
		return s.quotaForLease(t)
	}
	return nil
}
