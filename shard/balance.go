package shard

import (
	"sort"
	"time"

	"github.com/wardenlock/warden/placement"
)

// Leader balancing: every shard's leader does that shard's work (proposals,
// the lessor, keepalives), so leaders are spread evenly over the nodes. The
// node that leads the meta group moves one leadership per round from the
// busiest node to the idlest, by a Raft leader transfer, until no node leads
// more than one shard above the fair share.

// leaderMoves returns the transfers that bring the distribution closer to
// even, at most one per over-loaded node: (shard, target node) pairs. leaders
// maps shard → leader node; replicas maps shard → nodes holding a replica.
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
	fair := (len(leaders) + len(nodes) - 1) / len(nodes)
	var moves [][2]uint64
	moved := map[uint64]bool{}
	for _, s := range shards {
		from := leaders[s]
		if count[from] <= fair || moved[from] {
			continue
		}
		to, best := uint64(0), fair
		for _, n := range replicas[s] {
			if eligible[n] && count[n] < best {
				to, best = n, count[n]
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

// balanceEvery spaces rounds so each round's transfers land first.
const balanceEvery = 2 * time.Second

// A leadership change gives each lease of the shard a fresh TTL (bounded by
// lease checkpoints, lessor_checkpoint.go, for leases nobody keeps alive),
// and every change costs an election's worth of unavailability, so moving
// leaders while the cluster is unsettled only adds churn. Balancing
// waits until no shard has changed leader for stableFor, and never moves a
// shard led for less than minLeadership.
const (
	stableFor     = 5 * time.Second
	minLeadership = 10 * time.Second
)

// balanceLeaders runs one round on the meta leader.
func (h *Host) balanceLeaders(t *placement.Table) {
	if h.cfg.NoLeaderBalance || h.Leader(placement.MetaShard) != h.cfg.NodeID {
		return
	}
	if time.Since(h.lastBalance) < balanceEvery {
		return
	}
	h.lastBalance = time.Now()
	leaders := map[uint64]uint64{}
	replicas := map[uint64][]uint64{}
	now := time.Now()
	h.mu.RLock()
	for _, since := range h.leaderSince {
		if now.Sub(since) < stableFor {
			h.mu.RUnlock()
			return // leaderships are still moving: let them settle
		}
	}
	for _, si := range t.Shards {
		if _, local := h.Shard(si.ID); !local {
			continue // a transfer is requested through a local replica
		}
		leaders[si.ID] = h.leaders[si.ID]
		replicas[si.ID] = si.Replicas
	}
	since := make(map[uint64]time.Time, len(h.leaderSince))
	for id, t := range h.leaderSince {
		since[id] = t
	}
	h.mu.RUnlock()
	nodes := t.ActiveNodes() // draining nodes receive no leadership
	for _, m := range leaderMoves(leaders, replicas, nodes) {
		if now.Sub(since[m[0]]) < minLeadership {
			continue // counted, but too recently elected to move
		}
		si, _ := t.Shard(m[0])
		if err := h.nh.RequestLeaderTransfer(m[0], si.RID(m[1])); err == nil {
			h.log.Info("moving shard leadership", "shard", m[0], "from", leaders[m[0]], "to", m[1])
		}
	}
}
