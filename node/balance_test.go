package node_test

import (
	"testing"
	"time"

	"github.com/wardenlock/warden/node/nodetest"
)

// TestLeadersSpreadOverNodes: whatever the elections decide, the meta
// leader moves shard leaderships until every node leads its fair share, so
// every machine does work.
func TestLeadersSpreadOverNodes(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Shards: 6})
	deadline := time.Now().Add(40 * time.Second)
	for {
		count := map[int]int{}
		for _, id := range c.ShardIDs() {
			count[c.LeaderOf(id)]++
		}
		if count[0] == 2 && count[1] == 2 && count[2] == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("6 shard leaders over 3 nodes never evened out: %v", count)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
