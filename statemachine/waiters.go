package statemachine

import (
	"strings"

	"github.com/wardenlock/warden/wire"
)

// enqueue parks a conflicting blocking acquire at the tail of its path's
// FIFO queue.
func (s *StateMachine) enqueue(n *lockNode, mode wire.Mode, r *wire.Request, l *lease, campaign bool, out *wire.Response) *wire.Error {
	s.noteLoad(l, n)
	if int(n.Queued()) >= s.cfg.MaxWaiters {
		return wire.Errorf(wire.TooMany, "%s already has %d waiters", r.Path, s.cfg.MaxWaiters)
	}
	if l != nil && len(l.holders)+len(l.waiters) >= s.cfg.MaxLeaseLock {
		return wire.Errorf(wire.TooMany, "lease %d holds or waits for %d locks", l.id, s.cfg.MaxLeaseLock)
	}
	t := s.requestTenant(r, l)
	if err := s.quotaForLocks(t, 1, true); err != nil {
		return err
	}
	if l == nil {
		if err := s.quotaForLease(t); err != nil {
			return err
		}
	}
	w := &waiter{node: n, owner: strings.Clone(r.Owner), lease: r.Lease, ttl: r.TTL, client: r.Client, seq: r.Seq,
		mode: mode, campaign: campaign}
	if campaign {
		w.value = leaderValue(r.Value)
	}
	e := n.Val.extension()
	s.insertByPriority(e, w, r.Priority)
	s.trie.AddQueued(n, mode, 1)
	s.nWaiters++
	if l != nil {
		l.addWaiter(w)
	}
	w.arrival = s.emit(wire.Event{Kind: wire.EvQueued, Path: r.Path, Mode: mode, Lease: r.Lease,
		Owner: r.Owner, Client: r.Client, Seq: r.Seq, Value: w.value})
	if x := extraOf(r); x != nil {
		s.waitX[w.arrival] = x
	}
	if id := singleIdentity(r); id != "" {
		s.waitOwn[w.arrival] = id
	}
	t.countWait(l == nil, 1)
	s.queued = w
	out.Code, out.Lease, out.Mode = wire.Queued, r.Lease, mode
	return nil
}

// unqueue takes w out of its node's queue and its lease, and returns that
// session lease (nil for a single-lock acquire).
func (s *StateMachine) unqueue(w *waiter) *lease {
	e := w.node.Val.ext
	if w.prev == nil {
		e.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		e.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	if e.empty() {
		w.node.Val.ext = nil // an empty extension must not keep the node alive
	}
	s.trie.AddQueued(w.node, w.mode, -1)
	s.nWaiters--
	if len(s.waitX) > 0 {
		delete(s.waitX, w.arrival)
	}
	if len(s.waitOwn) > 0 {
		s.tenantOf(s.waitOwn[w.arrival]).countWait(true, -1)
		delete(s.waitOwn, w.arrival)
	}
	if w.lease == 0 {
		return nil
	}
	l := s.leases[w.lease]
	if l != nil {
		l.removeWaiter(w)
		l.ten.countWait(false, -1)
	}
	return l
}

// dropWaiter removes w without granting it (cancel, lease end). The caller
// runs the hand-off: w may have been blocking others.
func (s *StateMachine) dropWaiter(w *waiter, cause wire.Cause) {
	s.unqueue(w)
	s.emit(wire.Event{Kind: wire.EvDequeued, Cause: cause, Path: w.node.Path(), Mode: w.mode, Lease: w.lease,
		Owner: w.owner, Client: w.client, Seq: w.seq})
	code := wire.Cancelled
	if cause != wire.CauseCancelled {
		code = wire.SessionExpired
	}
	s.resolve(w, outcome{code: code})
}

// grantWaiter hands the lock to w.
func (s *StateMachine) grantWaiter(w *waiter) {
	x, identity := s.waitX[w.arrival], s.waitOwn[w.arrival]
	l := s.unqueue(w)
	path := w.node.Path()
	h := s.grant(grantArgs{node: w.node, path: path, mode: w.mode, lease: w.lease, l: l, owner: w.owner,
		ttl: w.ttl, campaign: w.campaign, value: w.value, cause: wire.CauseHandOff, client: w.client, seq: w.seq,
		identity: identity})
	s.keepHoldExtra(h, x, path)
	s.grants = append(s.grants, wire.Grant{Client: w.client, Seq: w.seq, Path: path,
		Token: h.token, Lease: h.leaseID(), Mode: h.mode})
	s.resolve(w, outcome{code: wire.OK, token: h.token, lease: h.leaseID(), mode: h.mode, count: 1})
}

// opCancel withdraws a queued acquire named by its Client and Seq.
func (s *StateMachine) opCancel(r *wire.Request, out *wire.Response) *wire.Error {
	var rec *outcome
	if c := s.clients[r.Client]; c != nil {
		rec = c.record(r.Seq)
	}
	if rec == nil || (rec.op != wire.OpAcquire && rec.op != wire.OpCampaign) {
		return wire.Errorf(wire.NotFound, "no acquire from client %d with seq %d", r.Client, r.Seq)
	}
	if w := rec.w; w != nil {
		if err := s.nodeFrozen(w.node); err != nil {
			return err
		}
		n := w.node
		s.dropWaiter(w, wire.CauseCancelled)
		s.handoff(n)
		s.tidy(n)
		return nil
	}
	if rec.code == wire.OK && rec.token != 0 {
		out.Token, out.Lease, out.Mode = rec.token, rec.lease, rec.mode // already granted: the caller holds it
	}
	return nil
}
