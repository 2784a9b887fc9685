package control

import (
	"fmt"
	"slices"
	"testing"

	"github.com/wardenlock/warden/placement"
)

// applyFill carries out a fill step on the table, as the range commands
// would.
func applyFill(t *testing.T, tab *placement.Table, a fillAction) {
	t.Helper()
	for i, r := range tab.Ranges {
		if a.op == "split" && r.Start < a.key && (r.End == "" || a.key < r.End) {
			left, right := r, r
			left.End, right.Start = a.key, a.key
			tab.Ranges = slices.Insert(slices.Delete(tab.Ranges, i, i+1), i, left, right)
			return
		}
		if a.op == "move" && r.Start == a.key {
			if r.Shard != a.from {
				t.Fatalf("move of %x names shard %d, the range is on %d", a.key, a.from, r.Shard)
			}
			tab.Ranges[i].Shard = a.shard
			return
		}
	}
	t.Fatalf("no range for %+v", a)
}

// A new shard is filled so that every active shard ends within a quarter
// of the fair share of the others — not only the new one: after a second
// shard took half of the first, a third takes from both.
func TestFillEvensOutEveryShard(t *testing.T) {
	never := func(string, uint64) bool { return false }
	for _, tc := range []struct {
		name  string
		start []uint64 // the shard of each of the table's even ranges
		fresh uint64
	}{
		{name: "a second shard", start: []uint64{1}, fresh: 2},
		{name: "a third, after the second took half", start: []uint64{1, 1, 2, 2}, fresh: 3},
		{name: "a fourth, shares uneven", start: []uint64{1, 1, 1, 1, 2, 2, 3, 3}, fresh: 4},
		{name: "a fifth", start: []uint64{1, 2, 3, 4}, fresh: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := &placement.Table{Gen: 1, NamespaceDepth: 2}
			tab.Ranges = placement.EvenRanges(make([]uint64, len(tc.start)), 1)
			for i := range tab.Ranges {
				tab.Ranges[i].Shard = tc.start[i]
			}
			for id := uint64(1); id <= tc.fresh; id++ {
				tab.Shards = append(tab.Shards, placement.ShardInfo{ID: id, Replicas: []uint64{1, 2, 3}})
			}
			rounds := 0
			for {
				a := planFill(tab, tc.fresh, never)
				if a.op == "" {
					break
				}
				if rounds++; rounds > maxFillRounds {
					t.Fatalf("not even after %d rounds: %v", maxFillRounds, shares(tab))
				}
				applyFill(t, tab, a)
			}
			fair := 1 / float64(tc.fresh)
			sh := keyShares(tab)
			for id := uint64(1); id <= tc.fresh; id++ {
				for other := uint64(1); other <= tc.fresh; other++ {
					if sh[id]-sh[other] > fair/4+1e-9 {
						t.Fatalf("after %d rounds shard %d holds %.3f and shard %d %.3f: %v", rounds, id, sh[id], other, sh[other], shares(tab))
					}
				}
			}
			t.Logf("%d rounds: %v", rounds, shares(tab))
		})
	}
}

// A range whose move to a shard was refused is not picked for it again.
func TestFillSkipsRefusedMoves(t *testing.T) {
	tab := &placement.Table{Gen: 1, NamespaceDepth: 2, Ranges: placement.EvenRanges([]uint64{1, 1}, 1)}
	tab.Shards = []placement.ShardInfo{{ID: 1}, {ID: 2}}
	first := tab.Ranges[0].Start
	a := planFill(tab, 2, func(start string, to uint64) bool { return start == first && to == 2 })
	if a.op != "move" || a.key == first || a.shard != 2 {
		t.Fatalf("%+v, want the other range moved to shard 2", a)
	}
}

func shares(tab *placement.Table) string {
	sh := keyShares(tab)
	var out []string
	for _, s := range tab.Shards {
		out = append(out, fmt.Sprintf("%d:%.3f", s.ID, sh[s.ID]))
	}
	return fmt.Sprint(out)
}
