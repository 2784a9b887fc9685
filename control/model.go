package control

import (
	"fmt"
	"sort"

	"github.com/wardenlock/warden/placement"
)

// The layout model is the shard policy's estimate of how busy each node
// is under a layout of replicas and leaders, so that it can compare the
// layout it has with the ones a new shard or a moved replica would give.
//
// The load is taken as spread evenly over the active shards (the fill
// gives each its share of the key space). For every operation of a shard,
// its leader does one unit of work and each follower followerCost units;
// a node's modeled load is the sum over the replicas it holds, divided by
// its CPU capacity relative to the largest node's. The busiest node bounds
// the cluster, so layouts are compared by their peak.
//
// Leaders are placed as the leader balancer places them (leaderMoves,
// applied until it moves nothing), and new shards as CreateShard places
// them (pickNodes), so the model predicts the layout the cluster reaches.

// followerCost is a follower's work for an operation, as a share of its
// leader's: under the growth benchmark, the two followers of a 3-node
// shard used 84 % of their CPU while the leader used all of its own
// (docs/bench/growth.md).
const followerCost = 0.8

// layoutGain is the least drop of the busiest node's modeled load that is
// worth a change of layout. Smaller gains are eaten by what more, smaller
// Raft groups cost: each proposal carries fewer operations, and on 3 nodes
// three shards spend about 1.5 times the CPU per operation of one
// (docs/scaling.md). On 3 equal nodes a second or third shard models a
// 10 % and 13 % drop, under this bar: one shard stays the layout there.
const layoutGain = 0.15

// layoutLookahead is how many shards ahead the model looks: on 4 nodes a
// third shard lowers no node's load, but a fourth does.
const layoutLookahead = 2

// layout is the model's view of a cluster: its active nodes and shards,
// where their replicas are and who leads them.
type layout struct {
	nodes    []uint64            // active nodes, ascending
	shards   []uint64            // active shards, ascending
	replicas map[uint64][]uint64 // shard → nodes holding a replica
	leaders  map[uint64]uint64   // shard → leading node (0: not known)
	capacity map[uint64]float64  // node → CPU capacity relative to the largest node's
	// unknown are the active nodes whose CPU is not known while other
	// nodes' is: the model has no capacity for them, so the policy does
	// not consult it.
	unknown []uint64
}

// layoutOf reads the layout of t's active shards, with the leaders of the
// policy's reading (st.Leads) and each node's CPU capacity (all nodes
// count as equal when no node's CPU is known).
func layoutOf(t *placement.Table, st *PolicyState) *layout {
	l := &layout{nodes: t.ActiveNodes(), replicas: map[uint64][]uint64{}, leaders: map[uint64]uint64{}, capacity: map[uint64]float64{}}
	for _, si := range t.ActiveShards() {
		l.shards = append(l.shards, si.ID)
		l.replicas[si.ID] = append([]uint64(nil), si.Replicas...)
	}
	for n, ids := range st.Leads {
		for _, id := range ids {
			l.leaders[id] = n
		}
	}
	var largest float64
	for _, n := range l.nodes {
		if r, ok := st.NodeCPU[n]; ok {
			largest = max(largest, r.Capacity)
		}
	}
	for _, n := range l.nodes {
		l.capacity[n] = 1
		if r, ok := st.NodeCPU[n]; ok && r.Capacity > 0 {
			l.capacity[n] = r.Capacity / largest
		} else if largest > 0 {
			l.unknown = append(l.unknown, n)
		}
	}
	return l
}

func (l *layout) clone() *layout {
	c := &layout{nodes: l.nodes, shards: append([]uint64(nil), l.shards...), replicas: map[uint64][]uint64{},
		leaders: map[uint64]uint64{}, capacity: l.capacity}
	for id, rs := range l.replicas {
		c.replicas[id] = append([]uint64(nil), rs...)
	}
	for id, n := range l.leaders {
		c.leaders[id] = n
	}
	return c
}

// held is how many replicas each active node holds.
func (l *layout) held() map[uint64]int {
	out := map[uint64]int{}
	for _, n := range l.nodes {
		out[n] = 0
	}
	for _, id := range l.shards {
		for _, n := range l.replicas[id] {
			out[n]++
		}
	}
	return out
}

// leads is how many shards each active node leads.
func (l *layout) leads() map[uint64]int {
	out := map[uint64]int{}
	for _, id := range l.shards {
		if n := l.leaders[id]; n != 0 {
			out[n]++
		}
	}
	return out
}

// settle gives every shard without a known leader the replica node leading
// the fewest, then applies the leader balancer's moves until it moves
// nothing.
func (l *layout) settle() {
	for _, id := range l.shards {
		if l.leaders[id] != 0 {
			continue
		}
		count := l.leads()
		var best uint64
		for _, n := range l.replicas[id] {
			if best == 0 || count[n] < count[best] {
				best = n
			}
		}
		l.leaders[id] = best
	}
	leaders := map[uint64]uint64{}
	for _, id := range l.shards {
		leaders[id] = l.leaders[id]
	}
	// Each round moves at least one leadership closer to even; the bound
	// only guards against a balancer that would cycle.
	for range len(l.shards)*len(l.nodes) + 1 {
		moves := leaderMoves(leaders, l.replicas, l.nodes)
		if len(moves) == 0 {
			break
		}
		for _, m := range moves {
			leaders[m[0]] = m[1]
		}
	}
	for id, n := range leaders {
		l.leaders[id] = n
	}
}

// load is each active node's modeled load: the share of the cluster's
// operations it works on, leaders counting one and followers followerCost,
// divided by its relative capacity.
func (l *layout) load() map[uint64]float64 {
	out := map[uint64]float64{}
	for _, n := range l.nodes {
		out[n] = 0
	}
	if len(l.shards) == 0 {
		return out
	}
	share := 1 / float64(len(l.shards))
	for _, id := range l.shards {
		for _, n := range l.replicas[id] {
			if _, active := out[n]; !active {
				continue
			}
			if n == l.leaders[id] {
				out[n] += share
			} else {
				out[n] += followerCost * share
			}
		}
	}
	for n := range out {
		out[n] /= l.capacity[n]
	}
	return out
}

// peak is the busiest node's modeled load.
func (l *layout) peak() float64 {
	var p float64
	for _, v := range l.load() {
		p = max(p, v)
	}
	return p
}

// addShard adds a shard of rf replicas where CreateShard would place it,
// and settles the leaders.
func (l *layout) addShard(id uint64, rf int) {
	l.shards = append(l.shards, id)
	l.replicas[id] = pickNodes(l.nodes, l.held(), l.leads(), rf)
	l.settle()
}

// growth looks up to layoutLookahead shards ahead (never past most
// shards): the shard count with the lowest modeled peak (the fewest, among
// equals), that peak, and the peak of the layout as it is, settled.
func (l *layout) growth(rf, most int) (best int, now, then float64) {
	cur := l.clone()
	cur.settle()
	now, best, then = cur.peak(), len(cur.shards), cur.peak()
	next := uint64(1)
	for _, id := range cur.shards {
		next = max(next, id+1)
	}
	for i := range layoutLookahead {
		if len(cur.shards) >= most || rf == 0 {
			break
		}
		cur.addShard(next+uint64(i), rf)
		if p := cur.peak(); p < then-1e-9 {
			best, then = len(cur.shards), p
		}
	}
	return best, now, then
}

// replicaMove is the replica move that evens out how many replicas the
// nodes hold: from the node holding the most to the one holding the
// fewest, when they differ by two or more (a node that joined holds none)
// and the move does not raise the modeled peak. It moves a follower's
// replica where it can, so no leadership has to move with it.
func (l *layout) replicaMove() (mv placement.ReplicaMove, ok bool) {
	held := l.held()
	var from, to uint64
	for _, n := range l.nodes {
		if from == 0 || held[n] > held[from] {
			from = n
		}
		if to == 0 || held[n] < held[to] {
			to = n
		}
	}
	if from == 0 || held[from]-held[to] < 2 {
		return mv, false
	}
	before := l.clone()
	before.settle()
	var shard uint64
	for _, id := range l.shards {
		if !hasNode(l.replicas[id], from) || hasNode(l.replicas[id], to) {
			continue
		}
		if shard == 0 || l.leaders[shard] == from && l.leaders[id] != from {
			shard = id
		}
	}
	if shard == 0 {
		return mv, false
	}
	after := before.clone()
	rs := after.replicas[shard][:0]
	for _, n := range before.replicas[shard] {
		if n != from {
			rs = append(rs, n)
		}
	}
	after.replicas[shard] = append(rs, to)
	if after.leaders[shard] == from {
		after.leaders[shard] = to
	}
	after.settle()
	if after.peak() > before.peak()+1e-9 {
		return mv, false
	}
	return placement.ReplicaMove{Shard: shard, From: from, To: to}, true
}

func hasNode(nodes []uint64, n uint64) bool {
	for _, m := range nodes {
		if m == n {
			return true
		}
	}
	return false
}

// pickNodes chooses rf of nodes for a new shard: the ones holding the
// fewest replicas, then leading the fewest shards, then the lowest ids;
// ascending.
func pickNodes(nodes []uint64, held, leads map[uint64]int, rf int) []uint64 {
	out := append([]uint64(nil), nodes...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if held[a] != held[b] {
			return held[a] < held[b]
		}
		if leads[a] != leads[b] {
			return leads[a] < leads[b]
		}
		return a < b
	})
	if rf < len(out) {
		out = out[:rf]
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// describeModel says, for people, what the model found.
func describeModel(now, then float64, from, to int) string {
	if to == from {
		return fmt.Sprintf("no layout within %d more shards lowers the busiest node's modeled load (%.2f) by %.0f%%",
			layoutLookahead, now, 100*layoutGain)
	}
	return fmt.Sprintf("%d shards model the busiest node's load at %.2f against %.2f with %d", to, then, now, from)
}
