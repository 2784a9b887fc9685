package control

import (
	"slices"
	"testing"
)

func TestLeaderMovesSpreadLeaders(t *testing.T) {
	all := []uint64{1, 2, 3}
	reps := func(shards ...uint64) map[uint64][]uint64 {
		m := map[uint64][]uint64{}
		for _, s := range shards {
			m[s] = all
		}
		return m
	}
	cases := []struct {
		name    string
		leaders map[uint64]uint64
		want    int // transfers proposed this round
	}{
		{"all on one node", map[uint64]uint64{2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1}, 1},
		{"already even", map[uint64]uint64{2: 1, 3: 2, 4: 3, 5: 1, 6: 2, 7: 3}, 0},
		{"within one of fair", map[uint64]uint64{2: 1, 3: 1, 4: 1, 5: 2, 6: 2, 7: 3, 8: 3, 9: 2}, 0},
		{"election under way", map[uint64]uint64{2: 1, 3: 1, 4: 0}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var shards []uint64
			for s := range tc.leaders {
				shards = append(shards, s)
			}
			moves := leaderMoves(tc.leaders, reps(shards...), all)
			if len(moves) != tc.want {
				t.Fatalf("moves %v, want %d", moves, tc.want)
			}
			for _, m := range moves {
				if m[1] == tc.leaders[m[0]] {
					t.Fatalf("move %v targets the current leader", m)
				}
			}
		})
	}
}

// Applying the proposed moves round after round converges to an even spread.
func TestLeaderMovesConverge(t *testing.T) {
	nodes := []uint64{1, 2, 3}
	leaders := map[uint64]uint64{}
	reps := map[uint64][]uint64{}
	for s := uint64(2); s < 18; s++ {
		leaders[s] = 1
		reps[s] = nodes
	}
	for round := 0; round < 20; round++ {
		for _, m := range leaderMoves(leaders, reps, nodes) {
			leaders[m[0]] = m[1]
		}
	}
	count := map[uint64]int{}
	for _, l := range leaders {
		count[l]++
	}
	for _, n := range nodes {
		if count[n] < 5 || count[n] > 6 {
			t.Fatalf("16 leaders over 3 nodes after balancing: %v", count)
		}
	}
}

// A shard's leadership moves, within the fair share, to a replica's node
// that leads fewer shards and holds fewer replicas: the new shard on a new
// node is led from it. Balanced layouts stay as they are.
func TestLeaderMovesPreferNodesWithFewerReplicas(t *testing.T) {
	// Shard 2 on nodes 1-3, led by 1; new shard 3 on nodes 2-4, led by 3,
	// which also follows shard 2; node 4 holds only shard 3.
	reps := map[uint64][]uint64{2: {1, 2, 3}, 3: {2, 3, 4}}
	moves := leaderMoves(map[uint64]uint64{2: 1, 3: 3}, reps, []uint64{1, 2, 3, 4})
	if len(moves) != 1 || moves[0] != [2]uint64{3, 4} {
		t.Fatalf("moves %v, want shard 3 to node 4", moves)
	}
	if moves := leaderMoves(map[uint64]uint64{2: 1, 3: 4}, reps, []uint64{1, 2, 3, 4}); len(moves) != 0 {
		t.Fatalf("after the move: %v, want none", moves)
	}
}

// A leader over the fair share whose shards' replicas all lead their fair
// share hands a leadership down a chain that ends at a node leading fewer:
// node 1 leads shards 2 and 6, node 4 leads none and holds no replica of
// either. Two transfers in one round (node 1 to a node leading one, that
// node to node 4) leave every node leading one shard; then nothing moves.
func TestLeaderMovesChainToANodeLeadingFewer(t *testing.T) {
	reps := map[uint64][]uint64{2: {1, 3, 5}, 3: {2, 3, 4}, 4: {2, 4, 5}, 5: {1, 3, 4}, 6: {1, 2, 5}}
	leaders := map[uint64]uint64{2: 1, 3: 2, 4: 5, 5: 3, 6: 1}
	nodes := []uint64{1, 2, 3, 4, 5}
	moves := leaderMoves(leaders, reps, nodes)
	if len(moves) != 2 || moves[0][1] != 4 {
		t.Fatalf("moves %v, want a chain of two ending at node 4, the last hop first", moves)
	}
	for _, m := range moves {
		if !slices.Contains(reps[m[0]], m[1]) {
			t.Fatalf("move %v: node %d holds no replica of shard %d", m, m[1], m[0])
		}
		leaders[m[0]] = m[1]
	}
	count := map[uint64]int{}
	for _, n := range leaders {
		count[n]++
	}
	for _, n := range nodes {
		if count[n] != 1 {
			t.Fatalf("after the chain: %v", leaders)
		}
	}
	if moves := leaderMoves(leaders, reps, nodes); len(moves) != 0 {
		t.Fatalf("after the chain: %v, want none", moves)
	}
}

// A round that moves a leadership down a chain counts it at the chain's
// end: another over-loaded node does not send its leadership to the same
// node in that round. Nodes 1 and 6 lead two shards each; node 1's chain
// ends at node 4, which node 6's shard 7 could also reach directly.
func TestLeaderMovesCountAChainAtItsEnd(t *testing.T) {
	reps := map[uint64][]uint64{2: {1, 3, 5}, 3: {2, 3, 4}, 4: {2, 4, 5}, 5: {1, 3, 4}, 6: {1, 2, 5},
		7: {6, 4, 2}, 8: {6, 3, 7}}
	leaders := map[uint64]uint64{2: 1, 6: 1, 3: 2, 5: 3, 4: 5, 7: 6, 8: 6}
	nodes := []uint64{1, 2, 3, 4, 5, 6, 7}
	moves := leaderMoves(leaders, reps, nodes)
	for _, m := range moves {
		leaders[m[0]] = m[1]
	}
	count := map[uint64]int{}
	for _, n := range leaders {
		count[n]++
	}
	if count[4] > 1 || count[7] > 1 {
		t.Fatalf("moves %v leave node 4 leading %d and node 7 %d, want at most one each", moves, count[4], count[7])
	}
}
