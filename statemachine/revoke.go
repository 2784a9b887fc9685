package statemachine

import "github.com/wardenlock/warden/wire"

// opRevokeLock asks the holder (Token) or every holder of Path to release
// within Grace ms. The holder is told by an EvRevokeRequested event on the
// path; if it still holds the lock when the deadline passes, the leader's
// timer proposes OpDeadlines and the lock is revoked then (cause Forced, the
// lock-delay starts, and the next grant's token is above the revoked one).
// An admin revocation (FlagForce, which the router allows only with the
// admin permission) works on any lock; anyone else may only revoke locks
// taken with FlagRevocable. A second request can only bring a deadline
// forward.
func (s *StateMachine) opRevokeLock(r *wire.Request, out *wire.Response) *wire.Error {
	if err := s.checkPath(r.Path); err != nil {
		return err
	}
	if r.Grace < 0 || r.Grace > s.cfg.MaxTTL {
		return wire.Errorf(wire.InvalidArgument, "grace %d ms is outside 0..%d", r.Grace, s.cfg.MaxTTL)
	}
	n := s.trie.Find(r.Path)
	var targets []*holder
	if n != nil {
		forHolders(n, func(h *holder) {
			if r.Token == 0 || h.token == r.Token {
				targets = append(targets, h)
			}
		})
	}
	if len(targets) == 0 {
		if r.Token != 0 {
			return s.tokenError(r.Token, r.Path)
		}
		return wire.Errorf(wire.NotFound, "%s is not held", r.Path)
	}
	force := r.Has(wire.FlagForce)
	cause := wire.CauseAdmin
	if !force {
		cause = wire.CauseWaiter
		for _, h := range targets {
			if x := s.holdX[h.token]; x == nil || !x.revocable {
				return wire.Errorf(wire.Unauthorized, "the holder of %s (token %d) did not allow revocation: only an admin can revoke it", r.Path, h.token)
			}
		}
	}
	deadline := s.now + r.Grace
	for _, h := range targets {
		x := s.holdX[h.token]
		if x == nil {
			x = &holdExtra{h: h}
			s.holdX[h.token] = x
		}
		if x.revokeAt == 0 || deadline < x.revokeAt {
			x.revokeAt = deadline
			s.timersChanged = true
		}
		s.emit(wire.Event{Kind: wire.EvRevokeRequested, Cause: cause, Path: r.Path, Mode: h.mode, Token: h.token,
			Lease: h.leaseID(), Owner: h.owner, TTL: x.revokeAt - s.now})
	}
	out.Count, out.TTL = uint32(len(targets)), r.Grace
	if r.Grace == 0 {
		for _, h := range targets {
			s.forceEnd(h)
		}
		s.handoff(n)
		s.tidy(n)
	}
	return nil
}

// opHandOver moves an election's leadership from its leader (Token) to the
// queued candidate whose owner is Target, in one command: there is no
// moment without a leader, and no other candidate can slip in between.
func (s *StateMachine) opHandOver(r *wire.Request, out *wire.Response) *wire.Error {
	if err := s.checkPath(r.Path); err != nil {
		return err
	}
	n, h, err := s.tokenHolder(r)
	if err != nil {
		return err
	}
	if !h.campaign {
		return wire.Errorf(wire.InvalidArgument, "token %d holds %s as a lock, not as an election leader", r.Token, r.Path)
	}
	var w *waiter
	if n.Val.ext != nil {
		for x := n.Val.ext.head; x != nil; x = x.next {
			if x.campaign && x.owner == r.Target {
				w = x
				break
			}
		}
	}
	if w == nil {
		return wire.Errorf(wire.NotFound, "no candidate %q is waiting on %s", r.Target, r.Path)
	}
	above, at, below := n.HeldConflicts(wire.Exclusive)
	if above != 0 || at != 1 || below != 0 {
		return wire.Errorf(wire.Conflict, "other holds cover %s: the successor could not lead at once", r.Path)
	}
	single, id := h.single, h.leaseID()
	s.endHold(h, wire.CauseHandover, r.Path, r)
	if single {
		s.bury(id)
	}
	s.grantWaiter(w)
	nh := ownHoldAny(n, w)
	if nh != nil {
		out.Token, out.Lease, out.Owner = nh.token, nh.leaseID(), nh.owner
	}
	s.handoff(n)
	s.tidy(n)
	return nil
}

// ownHoldAny finds the holder just granted to w.
func ownHoldAny(n *lockNode, w *waiter) *holder {
	var found *holder
	forHolders(n, func(h *holder) {
		if h.campaign && h.owner == w.owner && (w.lease == 0 || h.lw == w.lease) {
			found = h
		}
	})
	return found
}
