package shard

import (
	"testing"
	"time"
)

// With one send stream per peer, a step pass's messages to a peer, of every
// shard it stepped, leave in one batch: with one node leading five shards,
// the heartbeats of an idle cluster travel several shards to a batch. Each
// shard's heartbeat clock starts when it becomes leader, so five shards
// fall into at most three heartbeat ticks (HeartbeatRTT 3): at least 5/3
// shards a batch (1.3–2.3 measured: a stream's goroutine may wake and
// drain its queue before the pass queued the rest). With dragonboat's four
// streams they were split by shard id: 1.02.
func TestOnePeerBatchCarriesSeveralShards(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three hosts")
	}
	if dragonboatStreams != raftStreamsPerPeer {
		t.Fatalf("dragonboat runs %d streams per peer, want %d", dragonboatStreams, raftStreamsPerPeer)
	}
	hosts := startThree(t, func(c *HostConfig) { c.DataShards, c.NoLeaderBalance = 4, true })
	ids := hosts[0].ShardIDs()
	if len(ids) < 4 {
		t.Fatalf("host 1 runs shards %v, want at least 4", ids)
	}
	deadline := time.Now().Add(60 * time.Second) // bounds a hang; not a timing goal
	// leadAll moves every leader to node 1 and says whether it led them all.
	leadAll := func() bool {
		led := 0
		for _, id := range ids {
			switch l := hosts[0].Leader(id); {
			case l == 1:
				led++
			case l != 0:
				hosts[0].TransferLeader(id, 1)
			}
		}
		return led == len(ids)
	}
	// A window in which a leader moved also carries the election's
	// messages, one shard each: measure again.
	var before, after PassCounts
	for {
		for !leadAll() {
			if time.Now().After(deadline) {
				t.Fatal("host 1 does not lead every shard")
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		before = Passes()
		time.Sleep(2 * time.Second)
		after = Passes()
		if leadAll() {
			break
		}
	}
	batches, shards := after.SentBatches-before.SentBatches, after.SentShards-before.SentShards
	if batches == 0 {
		t.Fatal("no message batches sent in 2 s")
	}
	per := float64(shards) / float64(batches)
	t.Logf("%d batches carried %d shards' messages (%.2f each)", batches, shards, per)
	if per < 1.15 {
		t.Fatalf("%d batches carried %d shards' messages (%.2f each); want ≥ 1.15 with one stream per peer", batches, shards, per)
	}
}
