package statemachine

import (
	"slices"
	"strings"

	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/wire"
)

// Range moves, as the shard sees them. The meta group's driver runs:
//
//	source: Freeze(range, move)  every op touching the range answers RangeMoving
//	source: ExportQuery          a consistent copy of the range's state (it cannot change now)
//	dest:   Install(chunk)...    idempotent; the last chunk (FlagMoveFinal) takes ownership
//	meta:   switch the table     routers now send the range to the destination
//	source: Drop(range)          forgets the range; parked waiters are told RangeMoving
//
// and, to roll back before the install is complete, Drop on the destination
// (which does not own the range: it only forgets what chunks put there) and
// Unfreeze on the source. Every step is an entry in a log, so every replica
// takes it, and every step may be repeated.

// frozenRange is a range this shard owns but has frozen for a move.
type frozenRange struct {
	start, end string
	move       uint64
}

// frozenErr returns RangeMoving when key lies in a frozen range.
func (s *StateMachine) frozenErr(key string) *wire.Error {
	for _, f := range s.frozen {
		if key >= f.start && (f.end == "" || key < f.end) {
			return wire.Errorf(wire.RangeMoving, "the range holding this key is moving to another shard (move %d): retry", f.move)
		}
	}
	return nil
}

// pathFrozen: the span of p touches a frozen range.
func (s *StateMachine) pathFrozen(p string) *wire.Error {
	if len(s.frozen) == 0 {
		return nil
	}
	var kb wire.SpanBuf
	start, _ := hierarchy.SpanInto(p, s.cfg.SplitDepth, &kb)
	return s.frozenErr(start)
}

// nodeFrozen: node n lies in a frozen range.
func (s *StateMachine) nodeFrozen(n *lockNode) *wire.Error {
	if len(s.frozen) == 0 || n == nil {
		return nil
	}
	return s.pathFrozen(n.Path())
}

// leaseFrozen: some lock, waiter or key of lease l lies in a frozen range;
// ending the lease now would change a range whose state has been exported.
func (s *StateMachine) leaseFrozen(l *lease) *wire.Error {
	if len(s.frozen) == 0 {
		return nil
	}
	for _, h := range l.holders {
		if err := s.nodeFrozen(h.node); err != nil {
			return err
		}
	}
	for _, w := range l.waiters {
		if err := s.nodeFrozen(w.node); err != nil {
			return err
		}
	}
	for _, n := range l.keys {
		if err := s.nodeFrozen(n); err != nil {
			return err
		}
	}
	return nil
}

// routeCheck runs before an op's exactly-once record is consulted: a
// request on a range this shard no longer owns (or has frozen) must not be
// answered from a record, because the range's state now lives elsewhere.
func (s *StateMachine) routeCheck(r *wire.Request) *wire.Error {
	if r.Path == "" || r.Op.Internal() || (s.ownsAll && len(s.frozen) == 0) {
		return nil
	}
	if s.validPath(r.Path) != nil {
		return nil // the op itself reports the bad path
	}
	at, rerr := s.rangeIndex(r.Path)
	if rerr != nil && rerr.Code == wire.WrongShard {
		return rerr
	}
	if err := s.pathFrozen(r.Path); err != nil {
		return err
	}
	if rerr == nil {
		// Until this op ends, checkPath(r.Path) passes and countOp knows
		// the range: ranges and freezes change only in internal ops.
		s.routed, s.routedAt = r.Path, at
	}
	return nil
}

func moveRange(r *wire.Request) (wire.Range, *wire.Error) {
	if len(r.Ranges) != 1 || r.Gen == 0 {
		return wire.Range{}, wire.Errorf(wire.InvalidArgument, "a range move op names one range and a move id")
	}
	rg := r.Ranges[0]
	if rg.End != "" && rg.Start >= rg.End {
		return wire.Range{}, wire.Errorf(wire.InvalidArgument, "empty range [%x, %x)", rg.Start, rg.End)
	}
	return rg, nil
}

// ownedIndex returns the index of the owned range exactly [start, end), -1.
func (s *StateMachine) ownedIndex(start, end string) int {
	for i, rg := range s.ranges {
		if rg.Start == start && rg.End == end {
			return i
		}
	}
	return -1
}

// opFreezeRange freezes an owned range for move r.Gen. Repeating it is a
// no-op; a second move of a frozen range is refused.
func (s *StateMachine) opFreezeRange(r *wire.Request, out *wire.Response) *wire.Error {
	rg, err := moveRange(r)
	if err != nil {
		return err
	}
	for _, f := range s.frozen {
		if f.start == rg.Start && f.end == rg.End {
			if f.move == r.Gen {
				return nil
			}
			return wire.Errorf(wire.RangeMoving, "range is frozen by move %d", f.move)
		}
	}
	if s.ownedIndex(rg.Start, rg.End) < 0 {
		return wire.Errorf(wire.WrongShard, "shard %d does not own the range [%x, %x)", s.cfg.ShardID, rg.Start, rg.End)
	}
	s.frozen = append(s.frozen, frozenRange{start: strings.Clone(rg.Start), end: strings.Clone(rg.End), move: r.Gen})
	out.Token = max(s.fence, s.floor)
	return nil
}

// opUnfreezeRange ends a freeze (rollback). Unknown: no-op.
func (s *StateMachine) opUnfreezeRange(r *wire.Request, _ *wire.Response) *wire.Error {
	rg, err := moveRange(r)
	if err != nil {
		return err
	}
	s.frozen = slices.DeleteFunc(s.frozen, func(f frozenRange) bool {
		return f.start == rg.Start && f.end == rg.End && f.move == r.Gen
	})
	return nil
}

// inRange reports whether node n (at or below the namespace depth) lies in
// [start, end).
func (s *StateMachine) inRange(n *lockNode, start, end string) bool {
	k, _ := hierarchy.Span(n.Path(), s.cfg.SplitDepth)
	return k >= start && (end == "" || k < end)
}

// delayedIn returns, sorted, the paths in [start, end) with a lock-delay in
// force. A delay outlives its lock's trie node, so moves look it up here.
func (s *StateMachine) delayedIn(start, end string) []string {
	var out []string
	for p := range s.delays {
		if hierarchy.Depth(p) < s.cfg.SplitDepth {
			continue
		}
		if k, _ := hierarchy.Span(p, s.cfg.SplitDepth); k >= start && (end == "" || k < end) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// rangeNodes returns the namespace nodes (depth = SplitDepth) of [start,
// end), in path order. Shallower nodes span every range and are never moved.
func (s *StateMachine) rangeNodes(start, end string) []*lockNode {
	var out []*lockNode
	depth := s.cfg.SplitDepth
	s.trie.Root().Walk(func(n *lockNode) bool { return n.Depth() <= depth }, func(n *lockNode) bool {
		if n.Depth() == depth && s.inRange(n, start, end) {
			out = append(out, n)
		}
		return true
	})
	return out
}

// opDropRange forgets a range and everything in it, without hand-offs (the
// state lives on at the destination). Waiters parked on this shard are told
// to retry (EvDequeued, CauseMoved), and their exactly-once records go, so
// the retry is routed to the new owner instead of replayed here.
func (s *StateMachine) opDropRange(r *wire.Request, _ *wire.Response) *wire.Error {
	rg, err := moveRange(r)
	if err != nil {
		return err
	}
	for _, ns := range s.rangeNodes(rg.Start, rg.End) {
		s.dropSubtree(ns)
	}
	for _, p := range s.delayedIn(rg.Start, rg.End) {
		delete(s.delays, p)
		s.timersChanged = true
	}
	if i := s.ownedIndex(rg.Start, rg.End); i >= 0 {
		rs := slices.Delete(slices.Clone(s.ranges), i, i+1)
		s.setRanges(rs, s.rangeGen)
	}
	s.frozen = slices.DeleteFunc(s.frozen, func(f frozenRange) bool { return f.start == rg.Start && f.end == rg.End })
	if ro, ok := s.observer.(RangeObserver); ok {
		ro.RangeDropped(rg.Start, rg.End)
	}
	return nil
}

// dropSubtree removes every holder, waiter and key under ns.
func (s *StateMachine) dropSubtree(ns *lockNode) {
	var nodes []*lockNode
	ns.Walk(nil, func(n *lockNode) bool { nodes = append(nodes, n); return true })
	for _, n := range nodes {
		path := n.Path()
		for e := n.Val.ext; e != nil && e.head != nil; e = n.Val.ext {
			w := e.head
			s.unqueue(w)
			s.forgetRecord(w)
			s.emit(wire.Event{Kind: wire.EvDequeued, Cause: wire.CauseMoved, Path: path, Mode: w.mode, Lease: w.lease,
				Owner: w.owner, Client: w.client, Seq: w.seq})
		}
		var hs []*holder
		forHolders(n, func(h *holder) { hs = append(hs, h) })
		for i := len(hs) - 1; i >= 0; i-- {
			h := hs[i]
			hv, id := *h, h.leaseID()
			s.holdTenant(h).countHold(hv.single, -1)
			if hv.single {
				s.singles.remove(h)
			} else if l := s.leases[hv.lw]; l != nil {
				l.removeHolder(h)
			}
			removeHolder(n, h)
			s.trie.AddHeld(n, hv.mode, -1)
			s.nLocks--
			if hv.single && len(s.singleOwn) > 0 {
				delete(s.singleOwn, hv.token)
			}
			if x := s.holdX[hv.token]; x != nil {
				delete(s.holdX, hv.token)
				s.timersChanged = s.timersChanged || x.revokeAt != 0
			}
			s.emit(wire.Event{Kind: wire.EvReleased, Cause: wire.CauseMoved, Path: path, Mode: hv.mode, Token: hv.token,
				Lease: id, Owner: hv.owner})
			if hv.single { // the lease went with its lock: this lessor forgets it
				s.emit(wire.Event{Kind: wire.EvLeaseEnd, Cause: wire.CauseMoved, Lease: id, Path: path, Token: hv.token})
			}
		}
		if n.Val.ext != nil {
			if n.Val.ext.kv != nil {
				e := n.Val.ext.kv
				if l := s.leases[e.lease]; e.lease != 0 && l != nil {
					l.removeKey(n)
				}
				n.Val.ext.kv = nil
				s.nKVs--
			}
			n.Val.ext.leader = nil
		}
	}
	for i := len(nodes) - 1; i >= 0; i-- {
		delete(s.sems, nodes[i].Path())
		s.tidy(nodes[i])
	}
}

// forgetRecord drops the exactly-once record of a waiter that moved away.
func (s *StateMachine) forgetRecord(w *waiter) {
	if w.client == 0 {
		return
	}
	c := s.clients[w.client]
	if c == nil {
		return
	}
	if rec := c.record(w.seq); rec != nil && rec.w == w {
		c.drop(w.seq)
		c.waiting--
	}
}

// RangeObserver, when the Observer also implements it, hears about dropped
// ranges (inside Update; must not block): the shard ends watches there.
type RangeObserver interface {
	RangeDropped(start, end string)
}

// checkOverlap refuses to install a range that overlaps an owned one.
func (s *StateMachine) checkOverlap(rg wire.Range) *wire.Error {
	for _, o := range s.ranges {
		if (rg.End == "" || o.Start < rg.End) && (o.End == "" || rg.Start < o.End) {
			return wire.Errorf(wire.InvalidArgument, "range [%x, %x) overlaps [%x, %x), which shard %d owns",
				rg.Start, rg.End, o.Start, o.End, s.cfg.ShardID)
		}
	}
	return nil
}

func (s *StateMachine) takeOwnership(rg wire.Range) {
	rs := append(slices.Clone(s.ranges), rg)
	slices.SortFunc(rs, func(a, b wire.Range) int { return strings.Compare(a.Start, b.Start) })
	s.setRanges(rs, s.rangeGen)
}

// Frozen ranges are replicated state: a replica restored from a snapshot
// taken mid-move must keep refusing the range.
func init() {
	registerSection(snapSection{tag: 20, name: "frozen ranges",
		save: func(s *StateMachine, w *snapWriter) {
			w.uvarint(uint64(len(s.frozen)))
			for _, f := range s.frozen {
				w.str(f.start)
				w.str(f.end)
				w.uvarint(f.move)
			}
		},
		load: func(c *recovery) {
			r := c.r
			for n := r.count(1 << 16); n > 0 && r.err == nil; n-- {
				c.frozen = append(c.frozen, frozenRange{start: r.str(), end: r.str(), move: r.uvarint()})
			}
		},
	})
}
