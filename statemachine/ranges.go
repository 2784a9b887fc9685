package statemachine

import (
	"slices"
	"sort"
	"strings"

	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/wire"
)

// checkRange refuses a path whose span this shard does not own entirely.
func (s *StateMachine) checkRange(p string) *wire.Error {
	if s.ownsAll {
		return nil
	}
	_, err := s.rangeIndex(p)
	return err
}

// rangeIndex is checkRange that also says which owned range holds p.
func (s *StateMachine) rangeIndex(p string) (int, *wire.Error) {
	var kb wire.SpanBuf
	start, end := hierarchy.SpanInto(p, s.cfg.SplitDepth, &kb)
	i := s.rangeAt(start)
	if i < 0 || (s.ranges[i].End != "" && start >= s.ranges[i].End) {
		return i, wire.Errorf(wire.WrongShard, "shard %d does not own %s", s.cfg.ShardID, p)
	}
	if !hierarchy.InRange(start, end, s.ranges[i].Start, s.ranges[i].End) {
		return i, wire.Errorf(wire.SpansRanges, "%s covers keys outside the ranges of shard %d", p, s.cfg.ShardID)
	}
	return i, nil
}

// rangeAt returns the index of the last owned range starting at or below
// key, -1 if none. (sort.Search, not slices.BinarySearchFunc: there the key
// escapes, and the callers' keys are views of a buffer on their stack.)
func (s *StateMachine) rangeAt(key string) int {
	return sort.Search(len(s.ranges), func(i int) bool { return s.ranges[i].Start > key }) - 1
}

// countOp adds an applied op on path to its range's load counter.
func (s *StateMachine) countOp(p string) {
	if len(s.rangeOps) == 0 {
		return
	}
	if s.ownsAll {
		s.rangeOps[0]++
		return
	}
	if p == s.routed && s.routedAt < len(s.rangeOps) {
		s.rangeOps[s.routedAt]++
		return
	}
	var kb wire.SpanBuf
	start, _ := hierarchy.SpanInto(p, s.cfg.SplitDepth, &kb)
	if i := s.rangeAt(start); i >= 0 && i < len(s.rangeOps) {
		s.rangeOps[i]++
	}
}

// opSetRanges replaces the ranges this shard owns (those of the request
// that name this shard). Generations never go back, so a late duplicate of
// an older table cannot undo a newer one.
func (s *StateMachine) opSetRanges(r *wire.Request, out *wire.Response) *wire.Error {
	if r.Gen < s.rangeGen {
		return wire.Errorf(wire.InvalidArgument, "range generation %d is older than %d", r.Gen, s.rangeGen)
	}
	var mine []wire.Range
	for _, rg := range r.Ranges {
		if rg.Shard != s.cfg.ShardID {
			continue
		}
		if rg.End != "" && rg.Start >= rg.End {
			return wire.Errorf(wire.InvalidArgument, "empty range [%q, %q)", rg.Start, rg.End)
		}
		rg.Start, rg.End = strings.Clone(rg.Start), strings.Clone(rg.End) // kept: not a view of the entry
		mine = append(mine, rg)
	}
	slices.SortFunc(mine, func(a, b wire.Range) int { return strings.Compare(a.Start, b.Start) })
	for i := 1; i < len(mine); i++ {
		if prev := mine[i-1]; prev.End == "" || prev.End > mine[i].Start {
			return wire.Errorf(wire.InvalidArgument, "ranges starting at %q and %q overlap", prev.Start, mine[i].Start)
		}
	}
	s.setRanges(mine, r.Gen)
	out.Ranges = mine
	return nil
}

func (s *StateMachine) setRanges(rs []wire.Range, gen uint64) {
	ops := make([]uint64, len(rs))
	for i, r := range rs {
		for j, old := range s.ranges {
			if old.Start == r.Start && j < len(s.rangeOps) {
				ops[i] = s.rangeOps[j]
			}
		}
	}
	s.rangeOps = ops
	s.ranges, s.rangeGen = rs, gen
	s.ownsAll = len(rs) == 1 && rs[0].Start == "" && rs[0].End == ""
}

// opRaiseFence lifts the fence floor: every later token is above it. Range
// moves raise it to the source shard's counter, restores to a new epoch.
func (s *StateMachine) opRaiseFence(r *wire.Request, out *wire.Response) *wire.Error {
	if r.Token > s.floor {
		s.floor = r.Token
		s.emit(wire.Event{Kind: wire.EvFence, Token: r.Token})
	}
	out.Token = max(s.fence, s.floor)
	return nil
}
