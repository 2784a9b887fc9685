package router

import (
	"errors"
	"math"
	"testing"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

func threeShards() *placement.Table {
	ids := []uint64{2, 3, 4}
	t := &placement.Table{Gen: 1, NamespaceDepth: 2, Ranges: placement.EvenRanges(ids, 1)}
	for _, id := range ids {
		t.Shards = append(t.Shards, placement.ShardInfo{ID: id, Replicas: []uint64{1}})
	}
	return t
}

// legPlan is a leg's feed start revision and the revision it drops events
// up to, per shard.
type legPlan map[uint64][2]uint64

func plan(legs []*leg) legPlan {
	out := legPlan{}
	for _, l := range legs {
		out[l.shard] = [2]uint64{l.rev, l.after}
	}
	return out
}

// Where each shard's part of a prefix watch starts, and the positions and
// revisions that are refused.
func TestPrefixWatchStartLegs(t *testing.T) {
	tbl := threeShards()
	deep, _ := tbl.Locate("/cfg/app")
	for _, tc := range []struct {
		name string
		req  wire.Request
		want legPlan
		bad  bool
	}{
		{name: "from now", req: wire.Request{Path: "/cfg"},
			want: legPlan{2: {0, 0}, 3: {0, 0}, 4: {0, 0}}},
		{name: "a position: after each named shard, an unnamed one from its first event",
			req:  wire.Request{Path: "/cfg", Position: []wire.ShardRev{{Shard: 2, Rev: 10}, {Shard: 3, Rev: 0}, {Shard: 9, Rev: 5}}},
			want: legPlan{2: {11, 10}, 3: {1, 0}, 4: {1, 0}}},
		{name: "a revision for a prefix in one range", req: wire.Request{Path: "/cfg/app", Rev: 7},
			want: func() legPlan {
				p := legPlan{2: {0, 0}, 3: {0, 0}, 4: {0, 0}}
				p[deep.Shard] = [2]uint64{7, 6}
				return p
			}()},
		{name: "a revision for a prefix spanning shards", req: wire.Request{Path: "/cfg", Rev: 7}, bad: true},
		{name: "a shard named twice", req: wire.Request{Path: "/cfg", Position: []wire.ShardRev{{Shard: 2, Rev: 1}, {Shard: 2, Rev: 2}}}, bad: true},
		{name: "the largest revision", req: wire.Request{Path: "/cfg", Position: []wire.ShardRev{{Shard: 2, Rev: math.MaxUint64}}}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			legs, err := startLegs(tbl, &tc.req)
			if tc.bad {
				if !errors.Is(err, wire.ErrInvalidArgument) {
					t.Fatalf("got %v, want InvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := plan(legs)
			if len(got) != len(tc.want) {
				t.Fatalf("legs %v, want %v", got, tc.want)
			}
			for s, w := range tc.want {
				if got[s] != w {
					t.Fatalf("legs %v, want %v", got, tc.want)
				}
			}
		})
	}
}
