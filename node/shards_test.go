package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/placement"
)

// tableOf reads the meta group's table through the first running node.
func tableOf(t *testing.T, c *nodetest.Cluster) *placement.Table {
	t.Helper()
	for _, n := range c.Nodes {
		if n == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		tab, err := n.Host.RefreshTable(ctx)
		cancel()
		if err == nil && tab != nil {
			return tab
		}
	}
	return nil
}

// waitShardState waits until shard id is in state want (active, creating,
// retiring in Shards; stopping, retired in Retired), and, for active,
// until it no longer fills and no range move is in flight.
func waitShardState(t *testing.T, c *nodetest.Cluster, id uint64, want placement.ShardState, within time.Duration) *placement.Table {
	t.Helper()
	var last string
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		tab := tableOf(t, c)
		if tab != nil {
			if si, ok := tab.Shard(id); ok {
				last = fmt.Sprintf("%v fill=%v moves=%d", si.State, si.Fill, len(tab.RangeMoves))
				if si.State == want && (want != placement.ShardActive || !si.Fill && len(tab.RangeMoves) == 0) {
					return tab
				}
			} else if rs, ok := tab.RetiredOf(id); ok {
				last = fmt.Sprintf("%v pending=%v", rs.State(), rs.Pending)
				if rs.State() == want {
					return tab
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("shard %d never reached %v (last: %s)", id, want, last)
	return nil
}

// noReplicaOf checks that no running node hosts a replica of shard id.
func noReplicaOf(t *testing.T, c *nodetest.Cluster, id uint64) {
	t.Helper()
	for i, n := range c.Nodes {
		if n == nil {
			continue
		}
		if _, ok := n.Host.Shard(id); ok {
			t.Fatalf("node %d still hosts a replica of retired shard %d", i+1, id)
		}
	}
}

// TestShardAddAndRetireUnderTraffic starts with one data shard, adds one
// while four clients lock, release, read and keep alive (the new shard
// takes half the key space through range moves), then retires the
// original shard (its ranges move to the new one, its replicas stop and
// their data goes). The history must be linearizable: no double grant,
// tokens only go up across both moves, acknowledged operations survive.
func TestShardAddAndRetireUnderTraffic(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 1})
	tr := startTraffic(t, c, 4)
	time.Sleep(500 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	h := c.Nodes[0].Host
	id, err := h.CreateShard(ctx, nil, true, "test")
	if err != nil {
		t.Fatal(err)
	}
	if id != 3 {
		t.Fatalf("the new shard got id %d, want 3", id)
	}
	tab := waitShardState(t, c, id, placement.ShardActive, 60*time.Second)
	if n := len(tab.RangesOf(id)); n == 0 {
		t.Fatalf("the new shard holds no range: %+v", tab.Ranges)
	}
	time.Sleep(time.Second) // traffic on both shards
	if err := h.RetireShard(ctx, 2, "test"); err != nil {
		t.Fatal(err)
	}
	tab = waitShardState(t, c, 2, placement.ShardRetired, 60*time.Second)
	if len(tab.RangesOf(2)) != 0 || len(tab.RangesOf(id)) != len(tab.Ranges) {
		t.Fatalf("after retiring shard 2: %+v", tab.Ranges)
	}
	noReplicaOf(t, c, 2)
	tr.finish()
	if tr.w.ops < 200 {
		t.Fatalf("too little traffic: %d ops", tr.w.ops)
	}
	tr.w.check(t)
}
