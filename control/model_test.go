package control

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/placement"
)

// modelTable is a table of nodes 1..n and the given shards (id → replica
// nodes).
func modelTable(n int, shards map[uint64][]uint64) *placement.Table {
	t := &placement.Table{Gen: 1, NamespaceDepth: 2}
	for id := uint64(2); id < 2+uint64(len(shards)); id++ {
		t.Shards = append(t.Shards, placement.ShardInfo{ID: id, Replicas: shards[id]})
	}
	for i := 1; i <= n; i++ {
		t.Nodes = append(t.Nodes, placement.Node{ID: uint64(i), RaftAddr: "r"})
	}
	return t
}

// saturatedEverywhere is a reading of a cluster whose every node works at
// its CPU limit, with the leaders the balancer would settle on.
func saturatedEverywhere(t *placement.Table) *PolicyState {
	st := &PolicyState{LeaderOps: map[uint64]float64{}, ShardOps: map[uint64]float64{}, Leads: map[uint64][]uint64{},
		NodeCPU: map[uint64]cpuload.Reading{}}
	l := layoutOf(t, st)
	l.settle()
	for _, n := range t.ActiveNodes() {
		st.LeaderOps[n] = 0
		st.NodeCPU[n] = cpuload.Reading{Used: 0.2, Capacity: 0.2}
	}
	for _, id := range l.shards {
		st.ShardOps[id] = 30000 / float64(len(l.shards))
		st.LeaderOps[l.leaders[id]] += st.ShardOps[id]
		st.Leads[l.leaders[id]] = append(st.Leads[l.leaders[id]], id)
	}
	return st
}

func near(a, b float64) bool { return math.Abs(a-b) < 0.005 }

// The model's figures for equal nodes and three replicas per shard: on 3
// nodes more shards gain less than layoutGain; on 4 a third shard gains
// nothing and a fourth does; past one shard per node the peak rises.
func TestLayoutModelPeaks(t *testing.T) {
	three := layoutOf(modelTable(3, map[uint64][]uint64{2: {1, 2, 3}}), &PolicyState{})
	k, now, then := three.growth(3, 64)
	if !near(now, 1) || k != 3 || !near(then, (1+2*followerCost)/3) || then <= (1-layoutGain)*now {
		t.Fatalf("3 nodes, 1 shard: best %d shards at %.3f against %.3f", k, then, now)
	}
	four := layoutOf(modelTable(4, map[uint64][]uint64{2: {1, 2, 3}, 3: {2, 3, 4}}), &PolicyState{})
	k, now, then = four.growth(3, 64)
	if !near(now, followerCost) || k != 4 || !near(then, (1+2*followerCost)/4) {
		t.Fatalf("4 nodes, 2 shards: best %d shards at %.3f against %.3f", k, then, now)
	}
	if k, _, _ := four.growth(3, 3); k != 2 {
		t.Fatalf("with at most 3 shards the model chose %d", k)
	}
	full := four.clone()
	full.addShard(4, 3)
	full.addShard(5, 3)
	if k, now, _ := full.growth(3, 64); k != 4 || !near(now, (1+2*followerCost)/4) {
		t.Fatalf("4 nodes, 4 shards: the model chose %d shards (peak %.3f)", k, now)
	}
	for n, c := range full.leads() {
		if c != 1 {
			t.Fatalf("4 shards on 4 nodes: node %d leads %d (%v)", n, c, full.leaders)
		}
	}
}

// A node with half the capacity of the others carries twice the modeled
// load for the same replicas.
func TestLayoutModelWeighsCapacity(t *testing.T) {
	st := &PolicyState{Leads: map[uint64][]uint64{1: {2}}, NodeCPU: map[uint64]cpuload.Reading{
		1: {Capacity: 1}, 2: {Capacity: 1}, 3: {Capacity: 0.5}}}
	l := layoutOf(modelTable(3, map[uint64][]uint64{2: {1, 2, 3}}), st)
	load := l.load()
	if !near(load[1], 1) || !near(load[2], followerCost) || !near(load[3], 2*followerCost) {
		t.Fatalf("loads %v", load)
	}
	delete(st.NodeCPU, 3)
	if l := layoutOf(modelTable(3, map[uint64][]uint64{2: {1, 2, 3}}), st); len(l.unknown) != 1 || l.unknown[0] != 3 {
		t.Fatalf("node 3's CPU is not known, yet unknown = %v", l.unknown)
	}
}

// Replicas move onto a node that holds two or more fewer than another, a
// follower's replica first, until the counts are within one.
func TestLayoutModelMovesReplicasToAJoiningNode(t *testing.T) {
	tab := modelTable(5, map[uint64][]uint64{2: {1, 2, 3}, 3: {2, 3, 4}, 4: {1, 2, 4}, 5: {1, 3, 4}})
	st := saturatedEverywhere(tab)
	for moves := 0; ; moves++ {
		l := layoutOf(tab, st)
		mv, ok := l.replicaMove()
		if !ok {
			if moves != 2 {
				t.Fatalf("%d replica moves, want 2", moves)
			}
			break
		}
		if mv.To != 5 || l.leaders[mv.Shard] == mv.From {
			t.Fatalf("move %+v with leaders %v: want a follower's replica to node 5", mv, l.leaders)
		}
		si := &tab.Shards[mv.Shard-2]
		for i, n := range si.Replicas {
			if n == mv.From {
				si.Replicas[i] = mv.To
			}
		}
	}
	held := layoutOf(tab, st).held()
	for n, c := range held {
		if c < 2 || c > 3 {
			t.Fatalf("after the moves node %d holds %d replicas: %v", n, c, held)
		}
	}
}

// On 4 saturated nodes with two shards no node has room, but the model
// finds 4 shards better: the policy adds the third without waiting for
// saturation again, and stops at 4. On 5 nodes it first moves replicas to
// the new node, then adds a fifth shard.
func TestPolicyGrowsToTheModeledLayout(t *testing.T) {
	p := ShardPolicy{Auto: true, Sustain: 10 * time.Second, Cooldown: time.Minute}.WithDefaults()
	t0 := time.Unix(1000, 0)
	tab := modelTable(4, map[uint64][]uint64{2: {1, 2, 3}, 3: {2, 3, 4}})
	pm := &policyMemo{}
	create := func(at time.Time) shardDecision {
		st := saturatedEverywhere(tab)
		d := decideShards(tab, st, p, pm, at)
		if d.action == "create" {
			id := tab.NextShardID()
			tab.NextShard = id + 1
			lay := layoutOf(tab, st)
			tab.Shards = append(tab.Shards, placement.ShardInfo{ID: id, Replicas: placeNewShard(tab, 3, lay.leads())})
			pm.lastDecision = at
		}
		return d
	}
	create(t0)
	d := create(t0.Add(10 * time.Second))
	if d.action != "create" || !strings.Contains(d.reason, "4 shards model") {
		t.Fatalf("4 saturated nodes, 2 shards: %+v", d)
	}
	if d := create(t0.Add(30 * time.Second)); d.action != "" || !strings.Contains(d.verdict, "cooling down") {
		t.Fatalf("within the cooldown: %+v", d)
	}
	d = create(t0.Add(80 * time.Second))
	if d.action != "create" || !strings.Contains(d.reason, "completing the layout of 4 shards") {
		t.Fatalf("3 shards of the planned 4: %+v", d)
	}
	create(t0.Add(150 * time.Second))
	d = create(t0.Add(160 * time.Second))
	if d.action != "" || !strings.Contains(d.verdict, "no layout within 2 more shards") || len(tab.ActiveShards()) != 4 {
		t.Fatalf("4 shards on 4 nodes: %+v (%d shards)", d, len(tab.ActiveShards()))
	}

	tab.Nodes = append(tab.Nodes, placement.Node{ID: 5, RaftAddr: "r"})
	d = create(t0.Add(170 * time.Second))
	if d.action != "move" || d.move.To != 5 {
		t.Fatalf("a fifth node joined: %+v", d)
	}
	// While the move is under way, nothing else.
	tab.Moves = []placement.ReplicaMove{d.move}
	if d := create(t0.Add(175 * time.Second)); d.action != "" || !strings.Contains(d.verdict, "waiting") {
		t.Fatalf("during a replica move: %+v", d)
	}
	tab.Moves = nil
	at := t0.Add(180 * time.Second)
	for d.action == "move" {
		si := &tab.Shards[d.move.Shard-2]
		for i, n := range si.Replicas {
			if n == d.move.From {
				si.Replicas[i] = d.move.To
			}
		}
		at = at.Add(5 * time.Second)
		d = create(at)
	}
	if d.action != "create" || !strings.Contains(d.reason, "5 shards model") {
		t.Fatalf("5 nodes, 4 shards, the replicas spread: %+v", d)
	}
	final := layoutOf(tab, &PolicyState{})
	final.settle()
	for _, n := range final.nodes {
		if final.held()[n] != 3 || final.leads()[n] != 1 {
			t.Fatalf("5 shards on 5 nodes: held %v, leads %v", final.held(), final.leads())
		}
	}
}
