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
