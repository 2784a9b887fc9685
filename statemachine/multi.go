package statemachine

import (
	"slices"
	"strings"

	"github.com/wardenlock/warden/wire"
)

// MaxMultiPaths bounds the paths of one AcquireMulti.
const MaxMultiPaths = 64

// opAcquireMulti takes every path in Paths for one session owner, or none:
// the whole set is checked first, then granted in the same command, each
// path with its own fencing token. It never queues (a set waiting on
// several queues could be granted in part); the client waits by taking the
// paths one by one in the global order (see client.MultiLock).
func (s *StateMachine) opAcquireMulti(r *wire.Request, out *wire.Response) *wire.Error {
	if r.Lease == 0 {
		return wire.Errorf(wire.InvalidArgument, "a multi-lock needs a session lease")
	}
	if len(r.Paths) == 0 || len(r.Paths) > MaxMultiPaths {
		return wire.Errorf(wire.InvalidArgument, "a multi-lock takes 1..%d paths, not %d", MaxMultiPaths, len(r.Paths))
	}
	if err := checkMode(r.Mode); err != nil {
		return err
	}
	if r.Permits > 0 || r.Priority != 0 {
		return wire.Errorf(wire.InvalidArgument, "a multi-lock takes plain locks only")
	}
	if err := s.checkExtras(r, false); err != nil {
		return err
	}
	// The first path routes the request: if this shard does not own it the
	// router is told where it lives. A later path elsewhere means the set
	// spans shards, which the client must split (not a routing error).
	if err := s.checkPath(r.Paths[0]); err != nil {
		return err
	}
	sorted := slices.Clone(r.Paths)
	slices.Sort(sorted)
	for i, p := range sorted {
		if err := s.validPath(p); err != nil {
			return err
		}
		if err := s.checkRange(p); err != nil {
			return wire.Errorf(wire.SpansRanges, "%s is not served by the shard of %s: split the multi-lock by shard", p, r.Paths[0])
		}
		if i > 0 && pathsRelated(sorted[i-1], p) {
			return wire.Errorf(wire.InvalidArgument, "paths %s and %s overlap", sorted[i-1], p)
		}
	}
	l, err := s.useLease(r)
	if err != nil {
		return err
	}
	if len(l.holders)+len(l.waiters)+len(r.Paths) > s.cfg.MaxLeaseLock {
		return wire.Errorf(wire.TooMany, "lease %x would hold more than %d locks", l.id, s.cfg.MaxLeaseLock)
	}
	if err := s.quotaForLocks(l.ten, len(r.Paths), false); err != nil {
		return err
	}
	nodes := make([]*lockNode, len(r.Paths))
	defer func() {
		for _, n := range nodes {
			if n != nil {
				s.tidy(n)
			}
		}
	}()
	for i, p := range r.Paths {
		n := s.trie.Ensure(p)
		nodes[i] = n
		if err := s.multiCheck(n, p, r); err != nil {
			return err
		}
	}
	x := extraOf(r)
	owner := strings.Clone(r.Owner)
	for i, p := range r.Paths {
		h := s.grant(grantArgs{node: nodes[i], path: p, mode: r.Mode, lease: r.Lease, owner: owner, ttl: r.TTL,
			cause: wire.CauseDirect, client: r.Client, seq: r.Seq})
		s.keepHoldExtra(h, x, p)
		out.Holders = append(out.Holders, wire.Holder{Owner: owner, Lease: r.Lease, Mode: r.Mode, Token: h.token,
			Count: 1, Path: strings.Clone(p)})
	}
	out.Lease, out.Mode, out.Count = r.Lease, r.Mode, uint32(len(r.Paths))
	return nil
}

// multiCheck refuses one path of a multi-lock that cannot be granted now.
func (s *StateMachine) multiCheck(n *lockNode, p string, r *wire.Request) *wire.Error {
	if ownHold(n, r.Lease, r.Owner) != nil {
		return wire.Errorf(wire.SelfConflict, "the owner already holds %s", p)
	}
	above, at, below := n.HeldConflicts(r.Mode)
	if above+at+below > 0 || n.QueuedConflict(r.Mode) || (len(s.sems) > 0 && s.semBlocked(p, n, 0)) {
		return wire.Errorf(wire.Conflict, "%s is locked or has conflicting waiters", p)
	}
	if len(s.delays) > 0 {
		if until := s.delayedUntil(p); until > 0 {
			return lockDelayed(p, until)
		}
	}
	return nil
}

// refillMulti rebuilds a replayed multi-lock's answer from the holds, so a
// retry learns every token; if one of them has ended meanwhile the retry is
// told so instead of being handed dead tokens.
func (s *StateMachine) refillMulti(r *wire.Request, out *wire.Response) {
	if r.Op != wire.OpAcquireMulti || out.Code != wire.OK {
		return
	}
	for _, p := range r.Paths {
		var h *holder
		if n := s.trie.Find(p); n != nil {
			h = ownHold(n, r.Lease, r.Owner)
		}
		if h == nil {
			id := out.ID
			*out = wire.Response{ID: id, Code: wire.Cancelled,
				Msg: "this multi-lock was granted, but one of its locks has since ended"}
			return
		}
		out.Holders = append(out.Holders, wire.Holder{Owner: h.owner, Lease: h.leaseID(), Mode: h.mode,
			Token: h.token, Count: h.count, Path: p})
	}
}
