package control

import (
	"testing"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

func TestPlanRanges(t *testing.T) {
	tab := &placement.Table{Gen: 1, NamespaceDepth: 2, Ranges: placement.EvenRanges([]uint64{2, 3}, 1),
		Shards: []placement.ShardInfo{{ID: 2}, {ID: 3}}}
	a, b := tab.Ranges[0], tab.Ranges[1]
	on := RangePolicy{AutoSplit: true, Rebalance: true}.withDefaults()
	cases := []struct {
		name  string
		rates []rangeRate
		pol   RangePolicy
		moves []placement.Move
		want  string
	}{
		{"quiet", []rangeRate{{a, 10}, {b, 10}}, on, nil, ""},
		{"hot range splits", []rangeRate{{a, 9000}, {b, 10}}, on, nil, "split"},
		{"hot range, splitting off", []rangeRate{{a, 9000}, {b, 10}}, RangePolicy{}.withDefaults(), nil, ""},
		{"nothing while a move runs", []rangeRate{{a, 9000}, {b, 10}}, on, []placement.Move{{ID: 1}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tt := tab.Clone()
			tt.RangeMoves = tc.moves
			if got := planRanges(tt, tc.rates, tc.pol); got.op != tc.want {
				t.Fatalf("got %+v, want %q", got, tc.want)
			}
		})
	}
	// Two ranges on shard 2, shard 3 nearly idle: one moves to shard 3,
	// the one that evens the load best.
	k, _ := midKey(a.Start, a.End)
	lo, hi := a, a
	lo.End, hi.Start = k, k
	split := []rangeRate{{lo, 400}, {hi, 300}, {b, 100}}
	got := planRanges(tab, split, on)
	if got.op != "move" || got.shard != 3 || got.key != hi.Start {
		t.Fatalf("rebalance: %+v", got)
	}
	// A single range cannot be split further.
	if _, ok := midKey(wire.RouteKey("/a/b"), wire.RouteKey("/a/b")+"\x00"); ok {
		t.Fatal("a one-key range has no midpoint")
	}
	if m, ok := midKey("", ""); !ok || m <= "" {
		t.Fatal("the whole space must have a midpoint")
	}
}
