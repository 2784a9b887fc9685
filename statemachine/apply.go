package statemachine

import (
	"errors"
	"fmt"

	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/wire"
)

// apply runs one op, through the exactly-once records when it carries a
// client id. Its caller, applyOne, clears s.routed when it returns.
func (s *StateMachine) apply(r *wire.Request, out *wire.Response) {
	out.ID = r.ID
	s.routed = ""
	if err := s.routeCheck(r); err != nil {
		s.fail(r, out, err)
		return
	}
	if r.Path != "" {
		s.countOp(r.Path)
	}
	if r.Client == 0 || !dedupable(r.Op) {
		s.exec(r, out)
		return
	}
	if r.AckSeq > r.Seq && s.newRequest(r.Client, r.Seq) {
		// AckSeq says every Seq below it is finished; a request this shard
		// has not answered yet cannot be. (A retry may carry a higher
		// AckSeq: its first copy was answered, or is queued.)
		s.fail(r, out, wire.Errorf(wire.InvalidArgument, "AckSeq %d is above the request's own Seq %d, which has not been answered: a request is not finished before its answer", r.AckSeq, r.Seq))
		return
	}
	c := s.touchClient(r.Client)
	s.ack(c, r.AckSeq, r.Seq)
	sum := sumOf(r)
	if rec := c.record(r.Seq); rec != nil {
		if !rec.answers(r.Op, sum) {
			s.fail(r, out, wire.Errorf(wire.SeqReused, "seq %d of client %d answered another request (%v) on this shard: a retry must be the same request, a new request needs a new Seq", r.Seq, r.Client, rec.op))
			return
		}
		rec.replay(out)
		s.checkReplayedGrant(r, out)
		s.refillMulti(r, out)
		return
	}
	if r.Seq < c.floor {
		out.Code, out.Msg = wire.Ambiguous, fmt.Sprintf("seq %d is below this client's acknowledged floor %d on this shard: its outcome is forgotten", r.Seq, c.floor)
		return
	}
	s.queued = nil
	s.exec(r, out)
	s.remember(c, r, out, s.queued, sum)
}

// newRequest reports whether (client, seq) is neither recorded here nor
// below the client's floor: a request this shard has not answered.
func (s *StateMachine) newRequest(client, seq uint64) bool {
	c := s.clients[client]
	return c == nil || seq >= c.floor && c.record(seq) == nil
}

// checkReplayedGrant keeps a retry from resurrecting a grant that has ended:
// if the lock granted to this request has since been released, expired or
// revoked, the retry is told so instead of being handed a dead token.
func (s *StateMachine) checkReplayedGrant(r *wire.Request, out *wire.Response) {
	if (r.Op != wire.OpAcquire && r.Op != wire.OpCampaign) || out.Code != wire.OK || out.Token == 0 {
		return
	}
	if holderByToken(s.trie.Find(r.Path), out.Token) != nil {
		return
	}
	id := out.ID
	*out = wire.Response{ID: id, Code: wire.Cancelled,
		Msg: "this request was granted, but that grant has since ended (released, expired or revoked)"}
}

// exec runs one op and writes its outcome into out.
func (s *StateMachine) exec(r *wire.Request, out *wire.Response) {
	s.grants = s.grants[:0]
	s.newLease = nil
	err := s.dispatch(r, out)
	if err != nil {
		s.dropNewLease() // a refused request leaves no lease behind
		s.fail(r, out, err)
		return
	}
	out.Rev = s.rev
	if len(s.grants) > 0 {
		out.Grants = s.grants // encoded before the next op reuses it
	}
}

func (s *StateMachine) fail(r *wire.Request, out *wire.Response, err *wire.Error) {
	*out = wire.Response{ID: r.ID, Code: err.Code, Msg: err.Detail}
	if err.Code == wire.WrongShard {
		out.Hint = &wire.Hint{Shard: s.cfg.ShardID, Gen: s.rangeGen}
	}
}

func (s *StateMachine) dispatch(r *wire.Request, out *wire.Response) *wire.Error {
	switch r.Op {
	case wire.OpAcquire:
		return s.opAcquire(r, out, false)
	case wire.OpCampaign:
		return s.opAcquire(r, out, true)
	case wire.OpRelease:
		return s.opRelease(r, out, wire.CauseReleased)
	case wire.OpResign:
		return s.opRelease(r, out, wire.CauseResigned)
	case wire.OpRenew:
		return s.opRenew(r, out)
	case wire.OpProclaim:
		return s.opProclaim(r, out)
	case wire.OpCancel:
		return s.opCancel(r, out)
	case wire.OpRevoke:
		return s.opEndLease(r, out, wire.CauseRevoked)
	case wire.OpExpire:
		return s.opEndLease(r, out, wire.CauseExpired)
	case wire.OpSession:
		return s.opSession(r, out)
	case wire.OpKVPut:
		return s.opKVPut(r, out)
	case wire.OpKVDelete:
		return s.opKVDelete(r, out)
	case wire.OpRaiseFence:
		return s.opRaiseFence(r, out)
	case wire.OpSetRanges:
		return s.opSetRanges(r, out)
	case wire.OpCheckpoint:
		return s.opCheckpoint(r, out)
	case wire.OpAcquireMulti:
		return s.opAcquireMulti(r, out)
	case wire.OpRevokeLock:
		return s.opRevokeLock(r, out)
	case wire.OpHandOver:
		return s.opHandOver(r, out)
	case wire.OpDeadlines:
		return s.opDeadlines(r, out)
	case wire.OpFreezeRange:
		return s.opFreezeRange(r, out)
	case wire.OpInstallRange:
		return s.opInstallRange(r, out)
	case wire.OpDropRange:
		return s.opDropRange(r, out)
	case wire.OpUnfreezeRange:
		return s.opUnfreezeRange(r, out)
	case wire.OpNoop:
		// A new leader's lessor commits its term before it serves
		// keepalives; expiries decided under an older term are refused
		// from then on (see opEndLease).
		s.maxTerm = max(s.maxTerm, r.Term)
		return nil
	}
	if r.Op.Mutating() || r.Op == wire.OpKeepAlive {
		return wire.Errorf(wire.UnknownOp, "op %v is not applied by the state machine", r.Op)
	}
	return wire.Errorf(wire.UnknownOp, "op %v is not a log operation", r.Op)
}

// checkPath validates a data op's path and that this shard owns it.
func (s *StateMachine) checkPath(p string) *wire.Error {
	if p == s.routed && p != "" {
		return nil // routeCheck found it valid, owned and not frozen
	}
	if err := s.validPath(p); err != nil {
		return err
	}
	if err := s.checkRange(p); err != nil {
		return err
	}
	return s.pathFrozen(p)
}

func (s *StateMachine) validPath(p string) *wire.Error {
	if err := hierarchy.Validate(p, s.cfg.Paths); err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			return we
		}
		return wire.Errorf(wire.InvalidArgument, "%v", err)
	}
	return nil
}

func checkMode(m wire.Mode) *wire.Error {
	if m != wire.Exclusive && m != wire.Shared {
		return wire.Errorf(wire.InvalidArgument, "unknown lock mode %d", m)
	}
	return nil
}
