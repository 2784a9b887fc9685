package statemachine

import (
	"github.com/wardenlock/warden/hierarchy"
	"slices"

	"github.com/wardenlock/warden/wire"
)

// Lookup answers reads: *wire.Request (LockInfo, ListLocks, KVGet, KVList,
// Leader) with *wire.Response, and the shard layer's queries (LeasesQuery,
// LeaseCheck, StatsQuery) with their result types. It never changes state.
func (s *StateMachine) Lookup(q interface{}) (interface{}, error) {
	switch q := q.(type) {
	case *wire.Request:
		return s.read(q), nil
	case wire.Request:
		return s.read(&q), nil
	case LeasesQuery, *LeasesQuery:
		return s.liveLeases(), nil
	case LeaseCheck:
		return s.checkLeases(q.IDs, q.Identities), nil
	case *LeaseCheck:
		return s.checkLeases(q.IDs, q.Identities), nil
	case LimitCheck:
		return LimitResult{s.precheck(q.Req)}, nil
	case *LimitCheck:
		return LimitResult{s.precheck(q.Req)}, nil
	case StatsQuery, *StatsQuery:
		return s.stats(), nil
	case DumpQuery, *DumpQuery:
		return s.dump()
	case RangeLoadQuery:
		return RangeLoad{Ranges: slices.Clone(s.ranges), Ops: slices.Clone(s.rangeOps)}, nil
	case ExportQuery:
		return s.exportRange(q)
	}
	return nil, wire.Errorf(wire.UnknownOp, "unknown query type %T", q)
}

func (s *StateMachine) read(r *wire.Request) *wire.Response {
	out := &wire.Response{ID: r.ID}
	var err *wire.Error
	switch r.Op {
	case wire.OpLockInfo:
		err = s.lockInfo(r, out)
	case wire.OpListLocks:
		err = s.listLocks(r, out)
	case wire.OpKVGet:
		err = s.kvGet(r, out)
	case wire.OpKVList:
		err = s.kvList(r, out)
	case wire.OpLeader:
		err = s.leader(r, out)
	default:
		err = wire.Errorf(wire.UnknownOp, "op %v is not a read", r.Op)
	}
	if err != nil {
		*out = wire.Response{ID: r.ID, Code: err.Code, Msg: err.Detail}
		if err.Code == wire.WrongShard {
			out.Hint = &wire.Hint{Shard: s.cfg.ShardID, Gen: s.rangeGen}
		}
		return out
	}
	out.Rev = s.rev
	return out
}

func (s *StateMachine) lockInfo(r *wire.Request, out *wire.Response) *wire.Error {
	if err := s.checkPath(r.Path); err != nil {
		return err
	}
	n := s.trie.Find(r.Path)
	if until := s.delays[r.Path]; until != 0 {
		out.DelayUntil = until
	}
	if n == nil || (n.HeldHere() == 0 && n.Queued() == 0) {
		if out.DelayUntil != 0 {
			out.Path = r.Path
			return nil
		}
		return wire.Errorf(wire.NotFound, "%s is neither held nor awaited", r.Path)
	}
	out.Path = r.Path
	out.Permits = s.sems[r.Path]
	forHolders(n, func(h *holder) {
		if x := s.holdX[h.token]; x != nil && x.revokeAt != 0 && (out.RevokeAt == 0 || x.revokeAt < out.RevokeAt) {
			out.RevokeAt = x.revokeAt
		}
	})
	out.Holders = appendHolders(nil, n, r.Path)
	if len(out.Holders) > 0 {
		out.Mode = out.Holders[0].Mode
	}
	if n.Queued() > 0 {
		for w := n.Val.ext.head; w != nil; w = w.next {
			out.Waiters = append(out.Waiters, wire.Waiter{Owner: w.owner, Lease: w.lease, Mode: w.mode,
				Client: w.client, Seq: w.seq, Path: r.Path})
		}
	}
	out.Count = uint32(len(out.Holders))
	return nil
}

func appendHolders(dst []wire.Holder, n *lockNode, path string) []wire.Holder {
	forHolders(n, func(h *holder) {
		dst = append(dst, wire.Holder{Owner: h.owner, Lease: h.leaseID(), Mode: h.mode, Token: h.token,
			Count: h.count, Path: path})
	})
	return dst
}

// listLocks lists the holders of every held lock in the subtree, in path
// order, skipping subtrees without holds.
// checkListPath: a prefix shallower than the namespace depth covers
// namespaces on every shard; the router asks each shard for its part and
// merges, so the shard lists what it holds instead of refusing.
func (s *StateMachine) checkListPath(p string) *wire.Error {
	if hierarchy.Depth(p) >= s.cfg.SplitDepth {
		return s.checkPath(p)
	}
	return s.validPath(p)
}

func (s *StateMachine) listLocks(r *wire.Request, out *wire.Response) *wire.Error {
	if err := s.checkListPath(r.Path); err != nil {
		return err
	}
	root := s.trie.Find(r.Path)
	if root == nil {
		return nil
	}
	limit := int(r.Limit)
	root.Walk(func(n *lockNode) bool { return n.HeldHere()+n.HeldBelow() > 0 }, func(n *lockNode) bool {
		if n.HeldHere() > 0 {
			out.Holders = appendHolders(out.Holders, n, n.Path())
		}
		return limit == 0 || len(out.Holders) < limit
	})
	if limit > 0 && len(out.Holders) > limit {
		out.Holders = out.Holders[:limit]
	}
	out.Count = uint32(len(out.Holders))
	return nil
}

func (s *StateMachine) kvGet(r *wire.Request, out *wire.Response) *wire.Error {
	if err := s.checkPath(r.Path); err != nil {
		return err
	}
	e := kvAt(s.trie.Find(r.Path))
	if e == nil {
		return wire.Errorf(wire.NotFound, "no key %s", r.Path)
	}
	out.Path, out.Value, out.Version, out.Lease = r.Path, e.value, e.version, e.lease
	out.KVs = []wire.KV{kvOf(r.Path, e)}
	return nil
}

func kvOf(path string, e *kvEntry) wire.KV {
	return wire.KV{Key: path, Value: e.value, Version: e.version, Lease: e.lease, CreateRev: e.createRev, ModRev: e.modRev}
}

func (s *StateMachine) kvList(r *wire.Request, out *wire.Response) *wire.Error {
	if err := s.checkListPath(r.Path); err != nil {
		return err
	}
	root := s.trie.Find(r.Path)
	if root == nil {
		return nil
	}
	limit := int(r.Limit)
	root.Walk(nil, func(n *lockNode) bool {
		if e := kvAt(n); e != nil {
			out.KVs = append(out.KVs, kvOf(n.Path(), e))
		}
		return limit == 0 || len(out.KVs) < limit
	})
	out.Count = uint32(len(out.KVs))
	return nil
}

func (s *StateMachine) leader(r *wire.Request, out *wire.Response) *wire.Error {
	if err := s.checkPath(r.Path); err != nil {
		return err
	}
	n := s.trie.Find(r.Path)
	h := leaderOf(n)
	if h == nil {
		return wire.Errorf(wire.NotFound, "%s has no leader", r.Path)
	}
	out.Path, out.Token, out.Lease, out.Owner, out.Mode = r.Path, h.token, h.leaseID(), h.owner, h.mode
	if n.Val.ext != nil {
		out.Value = n.Val.ext.leader
	}
	return nil
}

func (s *StateMachine) liveLeases() []LeaseInfo {
	out := make([]LeaseInfo, 0, len(s.leases)+s.singles.n)
	for id, l := range s.leases {
		out = append(out, LeaseInfo{ID: id, TTL: l.ttl, Rev: l.rev, Checkpoint: s.checkpointOf(id)})
	}
	s.singles.each(func(h *holder) {
		out = append(out, LeaseInfo{ID: h.leaseID(), TTL: h.singleTTL(), Rev: h.singleRev(), Checkpoint: s.checkpointOf(h.leaseID())})
	})
	slices.SortFunc(out, func(a, b LeaseInfo) int { return cmpU64(a.ID, b.ID) })
	return out
}

func (s *StateMachine) checkLeases(ids []uint64, identities []string) []LeaseState {
	out := make([]LeaseState, len(ids))
	for i, id := range ids {
		single := s.single(id) != nil
		_, gone := s.tombs[id]
		switch {
		case i < len(identities) && !s.ownerOK(id, identities[i]):
			out[i] = LeaseForeign
		case s.leases[id] != nil || single:
			out[i] = LeaseAlive
			if _, cp := s.checkpoints[id]; cp {
				out[i] = LeaseCheckpointed
			}
		case gone:
			out[i] = LeaseGone
		}
	}
	return out
}

func (s *StateMachine) stats() Stats {
	return Stats{
		Locks: s.nLocks, Waiters: s.nWaiters, Leases: len(s.leases) + s.singles.n, KVs: s.nKVs,
		Rev: s.rev, Fence: max(s.fence, s.floor), Applied: s.applied, Ranges: slices.Clone(s.ranges),
		Clients: len(s.clients), LastTime: s.now,
	}
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
