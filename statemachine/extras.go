package statemachine

import (
	"slices"
	"strings"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Per-lock options that most locks never use (lock-delay, revocability, a
// pending revocation, semaphore permits, election priority) live in side
// tables instead of the holder and waiter structs, so a plain lock costs
// nothing more. Each table is replicated and snapshotted (sections.go tags
// 10-13).

// holdExtra is a holder's options and pending revocation, by token.
type holdExtra struct {
	h         *holder
	delay     int64 // lock-delay ms after a non-graceful end: 0 default, <0 none
	revocable bool  // waiters, not only admins, may ask for its revocation
	revokeAt  int64 // stamped ms at which it is revoked (0: no revocation asked)
}

// waitExtra is a waiter's options, by arrival revision; they pass to the
// holder when it is granted.
type waitExtra struct {
	permits   uint32
	delay     int64
	revocable bool
	priority  int64
}

// maxLockDelay bounds a lock-delay: a path locked out longer than a lease
// TTL would outlast the problem it guards against.
func (s *StateMachine) checkExtras(r *wire.Request, campaign bool) *wire.Error {
	if r.LockDelay < wire.LockDelayNone || r.LockDelay > s.cfg.MaxTTL {
		return wire.Errorf(wire.InvalidArgument, "lock-delay %d ms is outside -1..%d", r.LockDelay, s.cfg.MaxTTL)
	}
	if r.Permits > 0 && campaign {
		return wire.Errorf(wire.InvalidArgument, "an election cannot be a semaphore")
	}
	if r.Permits > uint32(s.cfg.MaxWaiters) {
		return wire.Errorf(wire.InvalidArgument, "%d permits is over the limit of %d", r.Permits, s.cfg.MaxWaiters)
	}
	if r.Priority != 0 && !campaign {
		return wire.Errorf(wire.InvalidArgument, "priority applies to campaigns only")
	}
	return nil
}

func extraOf(r *wire.Request) *waitExtra {
	if r.Permits == 0 && r.LockDelay == 0 && !r.Has(wire.FlagRevocable) && r.Priority == 0 {
		return nil // the common case allocates nothing
	}
	return &waitExtra{permits: r.Permits, delay: r.LockDelay, revocable: r.Has(wire.FlagRevocable), priority: r.Priority}
}

// keepHoldExtra records a new holder's options, if it has any.
func (s *StateMachine) keepHoldExtra(h *holder, x *waitExtra, path string) {
	if x == nil {
		return
	}
	if x.permits > 0 {
		s.sems[strings.Clone(path)] = x.permits // a map write replaces the key: keep no view of the entry
	}
	if x.delay != 0 || x.revocable {
		s.holdX[h.token] = &holdExtra{h: h, delay: x.delay, revocable: x.revocable}
	}
}

// dropHoldExtra forgets an ending holder's options and starts the path's
// lock-delay when the end was not graceful.
func (s *StateMachine) dropHoldExtra(hv *holder, n *lockNode, cause wire.Cause, path string) {
	delay := s.cfg.LockDelay
	if len(s.holdX) > 0 {
		if x := s.holdX[hv.token]; x != nil {
			if x.delay != 0 {
				delay = max(x.delay, 0)
			}
			if x.revokeAt != 0 {
				s.timersChanged = true
			}
			delete(s.holdX, hv.token)
		}
	}
	if len(s.sems) > 0 && n.HeldHere() == 0 {
		delete(s.sems, path)
	}
	if delay > 0 && (cause == wire.CauseExpired || cause == wire.CauseForced) {
		s.startDelay(path, delay, hv.token)
	}
}

// movedToken follows a holder whose token changed (an upgrade).
func (s *StateMachine) movedToken(old uint64, h *holder) {
	if x := s.holdX[old]; x != nil {
		delete(s.holdX, old)
		s.holdX[h.token] = x
	}
}

// startDelay makes path ungrantable until now+ms.
func (s *StateMachine) startDelay(path string, ms int64, token uint64) {
	until := s.now + ms
	if until <= s.delays[path] {
		return
	}
	s.delays[strings.Clone(path)] = until // a map write replaces the key: keep no view of the entry
	s.timersChanged = true
	s.emit(wire.Event{Kind: wire.EvDelayStarted, Path: path, Token: token, TTL: ms})
}

// delayedUntil returns the end of a lock-delay that blocks a grant on path:
// one on path itself, on an ancestor (a hold there covers path) or on a
// descendant (a hold on path would cover it). 0 when none is in force.
// A delay lasts until OpDeadlines ends it (the leader proposes that once
// replicated time reaches its end), so queued waiters are granted before
// anyone who asks later.
func (s *StateMachine) delayedUntil(path string) int64 {
	var until int64
	for p, u := range s.delays { // max over a set: order does not matter
		if u > until && pathsRelated(p, path) {
			until = u
		}
	}
	return until
}

// lockDelayed is a try-acquire's refusal during path's lock-delay, which
// ends at the stamped time until (unix ms); the time is shown in RFC 3339,
// UTC (formatting reads no clock).
func lockDelayed(path string, until int64) *wire.Error {
	return wire.Errorf(wire.LockDelayed, "%s is in lock-delay until %s", path,
		time.UnixMilli(until).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

// related reports whether a and b are equal or one is an ancestor of the other.
func pathsRelated(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return strings.HasPrefix(b, a) && (len(a) == len(b) || a == "/" || b[len(a)] == '/')
}

// semBlocked reports whether a grant of a request with permits (0: not a
// semaphore acquire) at n is blocked by the path's semaphore state: a
// semaphore is full, or the path is a semaphore and the request is not (or
// the other way round). It assumes the hierarchy check passed.
func (s *StateMachine) semBlocked(path string, n *lockNode, permits uint32) bool {
	limit := s.sems[path]
	held := n.HeldHere()
	switch {
	case permits == 0:
		return limit > 0
	case limit == 0:
		return held > 0 // plain shared holders
	default:
		return held >= limit || limit != permits
	}
}

// queuedPermits reports whether a permit waiter is queued at n: nothing
// may pass it there (a semaphore's queue is strictly FIFO).
func (s *StateMachine) queuedPermits(n *lockNode) bool {
	if n.Queued() == 0 || len(s.waitX) == 0 {
		return false
	}
	for w := n.Val.ext.head; w != nil; w = w.next {
		if x := s.waitX[w.arrival]; x != nil && x.permits > 0 {
			return true
		}
	}
	return false
}

// waitBlocked adds the semaphore and lock-delay rules to the hand-off's
// hierarchy check for waiter w.
func (s *StateMachine) waitBlocked(w *waiter) bool {
	if len(s.sems) == 0 && len(s.delays) == 0 && len(s.waitX) == 0 {
		return false
	}
	path := w.node.Path()
	var permits uint32
	if x := s.waitX[w.arrival]; x != nil {
		permits = x.permits
	}
	if (permits > 0 || len(s.sems) > 0) && s.semBlocked(path, w.node, permits) {
		return true
	}
	return len(s.delays) > 0 && s.delayedUntil(path) > 0
}

// insertByPriority links w into n's queue: after every waiter, except that a
// campaign goes ahead of queued campaigns with a lower priority.
func (s *StateMachine) insertByPriority(e *nodeExt, w *waiter, prio int64) {
	p := e.tail
	if w.campaign && (prio != 0 || len(s.waitX) > 0) {
		for p != nil && p.campaign && s.priorityOf(p) < prio {
			p = p.prev
		}
	}
	if p == nil {
		w.next = e.head
		if e.head != nil {
			e.head.prev = w
		}
		e.head = w
	} else {
		w.prev, w.next = p, p.next
		if p.next != nil {
			p.next.prev = w
		}
		p.next = w
	}
	if w.next == nil {
		e.tail = w
	}
}

func (s *StateMachine) priorityOf(w *waiter) int64 {
	if x := s.waitX[w.arrival]; x != nil {
		return x.priority
	}
	return 0
}

// nextDeadline is the earliest pending revocation deadline or lock-delay
// end (0: none). Derived from replicated state; read by the leader's timer.
func (s *StateMachine) computeNextDeadline() int64 {
	var next int64
	take := func(t int64) {
		if t > 0 && (next == 0 || t < next) {
			next = t
		}
	}
	for _, x := range s.holdX { // min over a set: order does not matter
		take(x.revokeAt)
	}
	for _, u := range s.delays {
		take(u)
	}
	return next
}

// opDeadlines applies what is due at the entry's stamped time: holders past
// their revocation deadline are revoked (tokens in order), and lock-delays
// that have run out end (paths in order), granting the waiters they held up.
func (s *StateMachine) opDeadlines(_ *wire.Request, out *wire.Response) *wire.Error {
	var due []uint64
	for t, x := range s.holdX { // collected, then sorted
		if x.revokeAt != 0 && x.revokeAt <= s.now {
			due = append(due, t)
		}
	}
	slices.Sort(due)
	changed := s.changed[:0]
	for _, t := range due {
		x := s.holdX[t]
		if x == nil {
			continue
		}
		changed = append(changed, x.h.node)
		s.forceEnd(x.h)
	}
	var ended []string
	for p, u := range s.delays {
		if u <= s.now {
			ended = append(ended, p)
		}
	}
	slices.Sort(ended)
	for _, p := range ended {
		delete(s.delays, p)
		s.timersChanged = true
		s.emit(wire.Event{Kind: wire.EvDelayEnded, Path: p})
		if n := s.nearest(p); n != nil {
			changed = append(changed, n)
		}
	}
	out.Count = uint32(len(due) + len(ended))
	s.settle(changed)
	return nil
}

// nearest returns the node at path, or its deepest existing ancestor: the
// place from which a hand-off finds every waiter the path's change concerns.
func (s *StateMachine) nearest(path string) *lockNode {
	for {
		if n := s.trie.Find(path); n != nil {
			return n
		}
		i := strings.LastIndexByte(path, '/')
		if i <= 0 {
			return s.trie.Root()
		}
		path = path[:i]
	}
}

// forceEnd revokes a holder: its lock ends (its single-lock lease with it)
// with cause Forced, which starts the lock-delay. The caller hands off.
func (s *StateMachine) forceEnd(h *holder) {
	single, id := h.single, h.leaseID()
	s.endHold(h, wire.CauseForced, "", nil)
	if single {
		s.bury(id)
	}
}
