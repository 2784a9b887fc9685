package statemachine

import (
	"github.com/wardenlock/warden/wire"
)

// An election is a path locked exclusively by campaigns: OpCampaign is an
// acquire (see opAcquire) whose holder carries a value, OpResign a release.
// The leadership token is the fencing token.

// opProclaim changes the leader's value, guarded by its token.
func (s *StateMachine) opProclaim(r *wire.Request, out *wire.Response) *wire.Error {
	if err := s.checkPath(r.Path); err != nil {
		return err
	}
	if len(r.Value) > s.cfg.MaxValue {
		return wire.Errorf(wire.TooLarge, "value is %d bytes, over the limit of %d", len(r.Value), s.cfg.MaxValue)
	}
	n, h, err := s.tokenHolder(r)
	if err != nil {
		return err
	}
	if h.mode != wire.Exclusive {
		return wire.Errorf(wire.NotHolder, "token %d holds %s shared: a leader holds it exclusively", r.Token, r.Path)
	}
	h.campaign = true
	n.Val.extension().leader = leaderValue(r.Value)
	s.emit(wire.Event{Kind: wire.EvLeader, Cause: wire.CauseProclaim, Path: r.Path, Token: h.token,
		Lease: h.leaseID(), Owner: h.owner, Value: r.Value})
	out.Token, out.Lease = h.token, h.leaseID()
	return nil
}

// leaderOf returns the exclusive holder of n, if any.
func leaderOf(n *lockNode) *holder {
	if n == nil || n.Held(wire.Exclusive) == 0 {
		return nil
	}
	var found *holder
	forHolders(n, func(h *holder) {
		if h.mode == wire.Exclusive {
			found = h
		}
	})
	return found
}
