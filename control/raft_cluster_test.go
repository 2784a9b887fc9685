package control

import (
	"fmt"
	"testing"
	"time"

	"github.com/wardenlock/warden/raftnode"
	"github.com/wardenlock/warden/shard"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// The Raft plumbing (package raftnode) on three real hosts.

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
	var before, after raftnode.PassCounts
	for {
		for !leadAll() {
			if time.Now().After(deadline) {
				t.Fatal("host 1 does not lead every shard")
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		before = raftnode.Passes()
		time.Sleep(2 * time.Second)
		after = raftnode.Passes()
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

// On three real hosts, followers learn every commit: after a run of
// writes, each follower applies up to the leader's applied index, with
// the default hold (held messages released by the timer or replaced) and
// with a hold so long that only replacements and heartbeats can carry the
// last commit.
func TestFollowersLearnCommitsThroughHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three hosts")
	}
	for _, wait := range []time.Duration{0, time.Hour} { // 0: the default
		t.Run(wait.String(), func(t *testing.T) {
			followersCatchUp(t, wait)
		})
	}
}

func followersCatchUp(t *testing.T, hold time.Duration) {
	hosts := startThree(t, func(c *HostConfig) { c.DataShards, c.NoLeaderBalance, c.CommitHold = 1, true, hold })
	const id = 2
	deadline := time.Now().Add(60 * time.Second) // bounds a hang; not a timing goal
	leader := func() *shard.Shard {
		for _, h := range hosts {
			if s, _ := h.Shard(id); s != nil && s.IsLeader() {
				return s
			}
		}
		return nil
	}
	before := raftnode.Passes()
	const puts = 50
	for k := 0; k < puts; k++ {
		for {
			s := leader()
			if s == nil {
				if time.Now().After(deadline) {
					t.Fatal("no leader")
				}
				time.Sleep(20 * time.Millisecond)
				continue
			}
			done := make(chan *wire.Response, 1)
			s.Submit(&wire.Request{Op: wire.OpKVPut, Path: fmt.Sprintf("/hold/k%03d", k), Value: []byte("v")},
				func(r *wire.Response) { done <- r })
			r := <-done
			if r.Code == wire.OK {
				break
			}
			if !r.Code.Retryable() || time.Now().After(deadline) {
				t.Fatalf("put %d: %v", k, r.Code)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	target := leader().AppliedIndex()
	for i, h := range hosts {
		s, _ := h.Shard(id)
		for s.AppliedIndex() < target {
			if time.Now().After(deadline) {
				t.Fatalf("host %d applied %d of %d", i+1, s.AppliedIndex(), target)
			}
			time.Sleep(5 * time.Millisecond)
		}
		v, err := h.NodeHost().StaleRead(id, statemachine.StatsQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := v.(statemachine.Stats); st.KVs != puts {
			t.Fatalf("host %d has %d keys, want %d", i+1, st.KVs, puts)
		}
	}
	after := raftnode.Passes()
	held, dropped, released := after.HeldCommits-before.HeldCommits, after.DroppedCommits-before.DroppedCommits,
		after.ReleasedCommits-before.ReleasedCommits
	t.Logf("commit-only Replicates: %d held, %d dropped, %d released late", held, dropped, released)
	if held == 0 {
		t.Fatal("no commit-only Replicate was held")
	}
}
