package client

import (
	"errors"
	"reflect"
	"testing"

	"github.com/wardenlock/warden/wire"
)

// TestOrderPathsIsGlobal: whatever order the caller lists the paths in, the
// groups come out in one order (range start key, then path), one group per
// shard, without duplicates. Two LockAll calls over the same paths therefore
// take them in the same order.
func TestOrderPathsIsGlobal(t *testing.T) {
	paths := []string{"/b/x", "/a/y", "/c/z", "/a/x", "/b/x", "/d/w"}
	// Two ranges split at the route key of /c/z's namespace: where each path
	// falls depends on its hashed namespace key, not on its name.
	split, _ := wire.Span("/c/z", 2)
	table := &wire.RouteTable{Depth: 2, Ranges: []wire.Range{
		{Start: "", End: split, Shard: 11}, {Start: split, End: "", Shard: 12}}}
	got, err := orderPaths(table, paths)
	if err != nil {
		t.Fatal(err)
	}
	reversed := []string{"/d/w", "/c/z", "/b/x", "/a/x", "/a/y"}
	again, err := orderPaths(table, reversed)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, again) {
		t.Fatalf("order depends on the caller's order: %v vs %v", got, again)
	}
	seen, total := map[string]bool{}, 0
	for _, g := range got {
		shard, _ := table.Locate(g[0])
		for i, p := range g {
			if s, _ := table.Locate(p); s != shard {
				t.Fatalf("group %v mixes shards", g)
			}
			if i > 0 && g[i-1] >= p {
				t.Fatalf("group %v is not in path order", g)
			}
			if seen[p] {
				t.Fatalf("%s twice", p)
			}
			seen[p] = true
			total++
		}
	}
	if total != 5 || len(got) != 2 {
		t.Fatalf("groups %v: want the 5 distinct paths in 2 shard groups", got)
	}
	if first, _ := table.Locate(got[0][0]); first != 11 {
		t.Fatalf("the first group is shard %d's: want the range with the lower start key", first)
	}
	// Without a table (one range) everything is one group, in path order.
	one, err := orderPaths(nil, paths)
	if err != nil || len(one) != 1 || one[0][0] != "/a/x" {
		t.Fatalf("no table: %v %v", one, err)
	}
	// A path that spans ranges cannot be ordered.
	if _, err := orderPaths(table, []string{"/"}); !errors.Is(err, ErrSpansRanges) {
		t.Fatalf("root path: %v, want ErrSpansRanges", err)
	}
}
