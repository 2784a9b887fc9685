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
		return wire.Errorf(wire.TooMany, "lease %x holds or waits for %d locks", l.id, s.cfg.MaxLeaseLock)
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

// opCancel withdraws an acquire, campaign or multi-lock named by its Client
// and Seq, and answers with its fate, which is final from this entry on:
// OK with Token (or Holders, for a multi-lock) when it was granted and is
// still held (the caller gives it back), OK without when it holds nothing.
// A queued waiter is dropped. An acquire this shard has not seen yet is
// withdrawn ahead of its arrival: its record says Cancelled, so the
// request, should it still come (a router's late retry, a proposal a new
// leader commits), takes nothing. That makes a withdrawal safe across
// leader changes: once the cancel is answered, the acquire can no longer
// take effect behind the caller's back.
func (s *StateMachine) opCancel(r *wire.Request, out *wire.Response) *wire.Error {
	var rec *outcome
	c := s.clients[r.Client]
	if c != nil {
		rec = c.record(r.Seq)
	}
	if rec == nil {
		return s.withdrawUnseen(c, r)
	}
	switch rec.op {
	case wire.OpAcquire, wire.OpCampaign:
	case wire.OpAcquireMulti:
		s.cancelledMulti(rec, r, out)
		return nil
	case wire.OpCancel:
		return nil // withdrawn before it arrived: nothing held
	default:
		return wire.Errorf(wire.InvalidArgument, "request %d of client %d is a %s, not an acquire", r.Seq, r.Client, rec.op)
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

// withdrawUnseen records the withdrawal of an acquire that has not reached
// this shard. Only a cancel routed by the acquire's path (its shard is the
// one that would apply the acquire) leaves a record. A Seq under the
// client's floor needs none: such a request is refused as forgotten
// (Ambiguous) and takes nothing.
func (s *StateMachine) withdrawUnseen(c *client, r *wire.Request) *wire.Error {
	if r.Path == "" {
		return wire.Errorf(wire.NotFound, "no acquire from client %d with seq %d (give its path to withdraw it before it arrives)", r.Client, r.Seq)
	}
	if r.Client == 0 || r.Seq == 0 {
		return wire.Errorf(wire.InvalidArgument, "cancel names no request (client %d, seq %d)", r.Client, r.Seq)
	}
	if err := s.checkPath(r.Path); err != nil {
		return err
	}
	if c == nil {
		c = s.touchClient(r.Client)
	}
	if r.Seq < c.floor {
		return nil
	}
	rec := s.newRecord()
	// The cancel names the acquire's path, paths and lease: its digest is
	// the acquire's, so the record answers that acquire (outcome.answers).
	*rec = outcome{op: wire.OpCancel, code: wire.Cancelled, msg: "withdrawn by its client before it reached the shard",
		sum: sumOf(r)}
	c.put(r.Seq, rec)
	return nil
}

// cancelledMulti answers the cancel of a multi-lock: the holds of the
// listed paths its owner still has (only when it was granted; the cancel
// names the paths, lease and owner of the multi-lock it withdraws).
func (s *StateMachine) cancelledMulti(rec *outcome, r *wire.Request, out *wire.Response) {
	if rec.code != wire.OK || r.Lease != rec.lease {
		return
	}
	for _, p := range r.Paths {
		n := s.trie.Find(p)
		if n == nil {
			continue
		}
		if h := ownHold(n, r.Lease, r.Owner); h != nil {
			out.Holders = append(out.Holders, wire.Holder{Owner: h.owner, Lease: h.leaseID(), Mode: h.mode,
				Token: h.token, Count: h.count, Path: p})
		}
	}
}
