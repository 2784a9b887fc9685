package control

import (
	"sort"
	"time"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// Leader balancing: every shard's leader does that shard's work (proposals,
// the lessor, keepalives), so leaders are spread evenly over the nodes. The
// node that leads the meta group moves one leadership per round from the
// busiest node to the idlest, by a Raft leader transfer, until no node leads
// more than one shard above the fair share. Within the fair share a
// leadership also moves to a replica's node that leads fewer shards and
// holds fewer replicas than its own: a new shard placed on a new, empty
// node is led from there, not from a node that already follows others.
// When no replica's node of an over-loaded leader's shards leads fewer, a
// chain of transfers (leaderChain) carries one leadership to a node that
// does. No move can undo another, so leaders do not flap.

// leaderMoves returns the transfers that bring the distribution closer to
// even, at most one per node it moves from: (shard, target node) pairs.
// leaders maps shard → leader node; replicas maps shard → nodes holding a
// replica.
func leaderMoves(leaders map[uint64]uint64, replicas map[uint64][]uint64, nodes []uint64) [][2]uint64 {
	if len(nodes) == 0 {
		return nil
	}
	count := map[uint64]int{}
	eligible := map[uint64]bool{}
	for _, n := range nodes {
		count[n] = 0
		eligible[n] = true
	}
	shards := make([]uint64, 0, len(leaders))
	for s, l := range leaders {
		if l == 0 {
			return nil // an election is under way: wait for it
		}
		count[l]++
		shards = append(shards, s)
	}
	sort.Slice(shards, func(i, j int) bool { return shards[i] < shards[j] })
	held := map[uint64]int{} // node → replicas it holds
	for _, rs := range replicas {
		for _, n := range rs {
			held[n]++
		}
	}
	fair := (len(leaders) + len(nodes) - 1) / len(nodes)
	var moves [][2]uint64
	moved := map[uint64]bool{}
	for _, s := range shards {
		from := leaders[s]
		if moved[from] {
			continue
		}
		over := count[from] > fair
		var to uint64
		for _, n := range replicas[s] {
			switch {
			case !eligible[n] || n == from:
				continue
			case over && count[n] < fair:
			case !over && count[n] < count[from] && held[n] < held[from]:
			default:
				continue
			}
			if to == 0 || count[n] < count[to] || count[n] == count[to] && held[n] < held[to] {
				to = n
			}
		}
		if to == 0 && over {
			// The chain's hops, the last first: its end gains a leadership.
			if chain := leaderChain(s, leaders, replicas, count, eligible, moved, fair); chain != nil {
				moves = append(moves, chain...)
				count[from]--
				count[chain[0][1]]++
				for _, m := range chain {
					moved[leaders[m[0]]] = true
				}
			}
		}
		if to == 0 {
			continue
		}
		moves = append(moves, [2]uint64{s, to})
		count[from]--
		count[to]++
		moved[from] = true
	}
	return moves
}

// leaderChain finds, for a shard whose leader leads more than the fair
// share and has no replica's node leading fewer, a chain of leaderships
// that ends at a node leading fewer: the shard moves to a replica's node
// b, a shard b leads moves to one of its replicas' node c, and so on. Every
// node on the chain leads as many shards as before except the first (one
// fewer) and the last (one more). Nodes that already move a leadership
// this round are not used. Breadth first, so the chain is the shortest;
// nil when there is none.
func leaderChain(s uint64, leaders map[uint64]uint64, replicas map[uint64][]uint64, count map[uint64]int,
	eligible, moved map[uint64]bool, fair int) [][2]uint64 {
	led := map[uint64][]uint64{} // node → shards it leads, ascending
	for id, n := range leaders {
		led[n] = append(led[n], id)
	}
	for _, ids := range led {
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	}
	type hop struct{ shard, from uint64 }
	start := leaders[s]
	via := map[uint64]hop{start: {}}
	queue := []uint64{}
	visit := func(shard, from uint64) uint64 {
		for _, n := range replicas[shard] {
			if _, seen := via[n]; seen || !eligible[n] || moved[n] {
				continue
			}
			via[n] = hop{shard, from}
			if count[n] < fair {
				return n
			}
			queue = append(queue, n)
		}
		return 0
	}
	end := visit(s, start)
	for end == 0 && len(queue) > 0 {
		a := queue[0]
		queue = queue[1:]
		for _, id := range led[a] {
			if end = visit(id, a); end != 0 {
				break
			}
		}
	}
	if end == 0 {
		return nil
	}
	var chain [][2]uint64
	for n := end; n != start; n = via[n].from {
		chain = append(chain, [2]uint64{via[n].shard, n})
	}
	return chain // the last hop first: each node gains a leadership before it gives one up
}

// balanceEvery spaces rounds so each round's transfers land first.
const balanceEvery = 2 * time.Second

// Every leadership change costs an election's worth of unavailability
// (and the new leader's lessor restarts each lease's countdown from the
// remaining time its checkpoint recorded, lease/checkpoint.go), so moving
// leaders while the cluster is unsettled only adds churn. Balancing waits
// until no shard has changed leader for stableFor, and never moves a shard
// led for less than minLeadership.
const (
	stableFor     = 5 * time.Second
	minLeadership = 10 * time.Second
)

// SetLeaderBalance turns this node's leader balancer on or off (it acts
// only while this node leads the meta group). HostConfig.NoLeaderBalance
// sets it at start.
func (h *Host) SetLeaderBalance(on bool) { h.balanceOff.Store(!on) }

// balanceLeaders runs one round on the meta leader. It counts every shard's
// leader: its own replicas' from Raft events, the other shards' as the
// router's remote leader loop heard them from nodes holding a replica
// (NoteLeader; a shard not heard of yet is left out of the round). A
// transfer of a shard this node holds no replica of goes to a node that has
// one (transfer.go).
func (h *Host) balanceLeaders(t *placement.Table) {
	if h.balanceOff.Load() || h.Leader(placement.MetaShard) != h.cfg.NodeID {
		return
	}
	if time.Since(h.lastBalance) < balanceEvery {
		return
	}
	h.lastBalance = time.Now()
	leaders := map[uint64]uint64{}
	replicas := map[uint64][]uint64{}
	since := map[uint64]time.Time{}
	now := time.Now()
	h.mu.RLock()
	for _, m := range []map[uint64]time.Time{h.leaderSince, h.remoteSince} {
		for _, at := range m {
			if now.Sub(at) < stableFor {
				h.mu.RUnlock()
				return // leaderships are still moving: let them settle
			}
		}
	}
	for _, si := range t.Shards {
		l, at := h.leaders[si.ID], h.leaderSince[si.ID]
		if _, local := h.Shard(si.ID); !local {
			if l, at = h.remote[si.ID], h.remoteSince[si.ID]; l == 0 {
				continue // not heard of yet
			}
		}
		leaders[si.ID], since[si.ID] = l, at
		replicas[si.ID] = si.Replicas
	}
	h.mu.RUnlock()
	nodes := t.ActiveNodes() // draining nodes receive no leadership
	for _, m := range leaderMoves(leaders, replicas, nodes) {
		shardID, from, to := m[0], leaders[m[0]], m[1]
		if now.Sub(since[shardID]) < minLeadership {
			continue // counted, but too recently elected to move
		}
		si, _ := t.Shard(shardID)
		if _, local := h.Shard(shardID); !local {
			h.forgetLeader(shardID) // until heard again, after the transfer
		}
		h.requestTransfer(shardID, si.RID(to), func(r *wire.Response) {
			if r.Code == wire.OK {
				h.log.Info("moving shard leadership", "shard", shardID, "from", from, "to", to)
			} else {
				h.log.Debug("shard leadership transfer not started", "shard", shardID, "to", to, "code", r.Code, "err", r.Msg)
			}
		})
	}
}
