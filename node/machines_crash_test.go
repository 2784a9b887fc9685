package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4"

	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// A replica move stopped at each of its steps, with the node driving it
// (the shard's leader, which is also the replica being moved away) crashed
// there: after the restart the move completes, the shard's Raft membership
// is exactly what the table says, and the locks held before are intact.
func TestReplicaMoveSurvivesDriverCrashAtEachStep(t *testing.T) {
	steps := []placement.MoveStep{placement.MovePlanned, placement.MoveLearner, placement.MoveCaughtUp, placement.MoveVoter}
	for _, step := range steps {
		t.Run(step.String(), func(t *testing.T) {
			c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 1})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cl := newClient(t, c)
			kept := holdLocks(t, ctx, cl, 6)
			four := c.AddNode()
			fourID := c.Cfgs[four].ID
			const shard = 2
			holdAll(c, step)
			victim := leaderIndex(t, c, shard)
			from := c.Cfgs[victim].ID
			if err := cl.MoveReplica(ctx, shard, from, fourID); err != nil {
				t.Fatal(err)
			}
			waitPlacement(t, c, "move held at "+step.String(), func(tab *placement.Table) error {
				if m, ok := tab.Move(shard); !ok || m.Step != step {
					return fmt.Errorf("moves %v", tab.Moves)
				}
				return nil
			})
			c.StopNode(victim)
			holdAll(c, 0)
			c.StartNode(victim)
			waitPlacement(t, c, "move completed", func(tab *placement.Table) error {
				si, _ := tab.Shard(shard)
				if len(tab.Moves) > 0 || !si.Has(fourID) || si.Has(from) {
					return fmt.Errorf("replicas %v, moves %v", si.Replicas, tab.Moves)
				}
				return nil
			})
			checkMembershipMatchesTable(t, c, shard)
			checkKept(t, ctx, c, kept)
		})
	}
}

// A move rolled back after its learner caught up removes the learner; the
// same node can then receive the shard again (under a new replica id, as
// Raft never readmits a removed one).
func TestReplicaMoveAbortThenRetry(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := newClient(t, c)
	kept := holdLocks(t, ctx, cl, 4)
	four := c.AddNode()
	fourID := c.Cfgs[four].ID
	const shard = 2
	from := c.Cfgs[leaderIndex(t, c, shard)].ID
	holdAll(c, placement.MoveCaughtUp)
	if err := cl.MoveReplica(ctx, shard, from, fourID); err != nil {
		t.Fatal(err)
	}
	var first uint64
	waitPlacement(t, c, "learner caught up", func(tab *placement.Table) error {
		m, ok := tab.Move(shard)
		if !ok || m.Step != placement.MoveCaughtUp {
			return fmt.Errorf("moves %v", tab.Moves)
		}
		first = m.ToRID
		return nil
	})
	if _, ok := c.Nodes[four].Host.Shard(shard); !ok {
		t.Fatal("the caught-up learner is not running on the target")
	}
	if err := cl.AbortReplicaMove(ctx, shard); err != nil {
		t.Fatal(err)
	}
	holdAll(c, 0)
	waitPlacement(t, c, "abort finished", func(tab *placement.Table) error {
		si, _ := tab.Shard(shard)
		if len(tab.Moves) > 0 || si.Has(fourID) || !si.Has(from) {
			return fmt.Errorf("replicas %v, moves %v", si.Replicas, tab.Moves)
		}
		return nil
	})
	c.WaitFor(time.Minute, "learner removed from the target", func() error {
		if _, ok := c.Nodes[four].Host.Shard(shard); ok {
			return fmt.Errorf("node %d still runs the aborted learner", fourID)
		}
		return nil
	})
	checkMembershipMatchesTable(t, c, shard)

	if err := cl.MoveReplica(ctx, shard, from, fourID); err != nil {
		t.Fatal(err)
	}
	waitPlacement(t, c, "second move", func(tab *placement.Table) error {
		si, _ := tab.Shard(shard)
		if len(tab.Moves) > 0 || !si.Has(fourID) {
			return fmt.Errorf("replicas %v, moves %v", si.Replicas, tab.Moves)
		}
		if rid := si.RID(fourID); rid == first {
			return fmt.Errorf("the retried replica reused the removed id %d", rid)
		}
		return nil
	})
	checkMembershipMatchesTable(t, c, shard)
	checkKept(t, ctx, c, kept)
}

func holdAll(c *nodetest.Cluster, step placement.MoveStep) {
	for _, n := range c.Nodes {
		if n != nil {
			n.Host.HoldMovesAt(step)
		}
	}
}

// checkMembershipMatchesTable: the shard's Raft voters are exactly the
// replica ids the table lists, and there are no learners left.
func checkMembershipMatchesTable(t *testing.T, c *nodetest.Cluster, shard uint64) {
	t.Helper()
	c.WaitFor(time.Minute, "membership equals the table", func() error {
		i := c.LeaderOf(shard)
		if i < 0 {
			return fmt.Errorf("no leader")
		}
		h := c.Nodes[i].Host
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		mem, err := h.NodeHost().SyncGetShardMembership(ctx, shard)
		if err != nil {
			return err
		}
		tab, err := h.RefreshTable(ctx)
		if err != nil {
			return err
		}
		si, _ := tab.Shard(shard)
		var want, got []uint64
		for _, n := range si.Replicas {
			want = append(want, si.RID(n))
		}
		for rid := range mem.Nodes {
			got = append(got, rid)
		}
		sort.Slice(want, func(a, b int) bool { return want[a] < want[b] })
		sort.Slice(got, func(a, b int) bool { return got[a] < got[b] })
		if fmt.Sprint(want) != fmt.Sprint(got) || len(mem.NonVotings) > 0 {
			return fmt.Errorf("voters %v, learners %v; table %v", got, mem.NonVotings, want)
		}
		return nil
	})
}

func checkKept(t *testing.T, ctx context.Context, c *nodetest.Cluster, kept map[string]uint64) {
	t.Helper()
	cl := newClient(t, c)
	for p, tok := range kept {
		info, err := cl.LockInfo(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Holders) != 1 || info.Holders[0].Token != tok {
			t.Fatalf("%s: holders %+v, want token %d", p, info.Holders, tok)
		}
	}
}

// A joined node that received a replica restarts with it (its manifest
// lists the replica and its non-voting meta replica), catches up on what
// it missed while down, and still does not vote in the meta group.
func TestJoinedNodeRestartsWithItsReplicas(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := newClient(t, c)
	four := c.AddNode()
	fourID := c.Cfgs[four].ID
	const shard = 2
	if err := cl.MoveReplica(ctx, shard, 1, fourID); err != nil {
		t.Fatal(err)
	}
	waitPlacement(t, c, "move done", func(tab *placement.Table) error {
		if si, _ := tab.Shard(shard); len(tab.Moves) > 0 || !si.Has(fourID) {
			return fmt.Errorf("replicas %v moves %v", si.Replicas, tab.Moves)
		}
		return nil
	})
	c.WaitFor(time.Minute, "manifest marks the replica a voter", func() error {
		b, err := os.ReadFile(filepath.Join(c.Cfgs[four].DataDir, "replicas.json"))
		if err != nil {
			return err
		}
		var man struct {
			Meta *struct {
				NonVoting bool `json:"non_voting"`
			} `json:"meta"`
			Shards []struct {
				Shard     uint64 `json:"shard"`
				NonVoting bool   `json:"non_voting"`
			} `json:"shards"`
		}
		if err := json.Unmarshal(b, &man); err != nil {
			return err
		}
		if man.Meta == nil || !man.Meta.NonVoting || len(man.Shards) != 1 || man.Shards[0].Shard != shard || man.Shards[0].NonVoting {
			return fmt.Errorf("manifest %s", b)
		}
		return nil
	})
	c.StopNode(four)
	kept := holdLocks(t, ctx, cl, 5) // written while node 4 is down
	c.StartNode(four)
	h := c.Nodes[four].Host
	if _, ok := h.Shard(shard); !ok {
		t.Fatal("the restarted node does not run its replica")
	}
	c.WaitFor(time.Minute, "restarted replica caught up", func() error {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		_, err := h.NodeHost().SyncRead(rctx, shard, statemachine.StatsQuery{})
		return err
	})
	// Right after a restart the replica may not know a leader yet and
	// drops the read: ask until it answers.
	var mem *dragonboat.Membership
	c.WaitFor(time.Minute, "meta membership read on the restarted node", func() error {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		var err error
		mem, err = h.NodeHost().SyncGetShardMembership(rctx, placement.MetaShard)
		return err
	})
	for rid := range mem.Nodes {
		if placement.NodeOf(rid) == fourID {
			t.Fatal("the joined node became a meta voter by restarting")
		}
	}
	// Its own state machine has the locks written while it was down.
	for p, tok := range kept {
		resp, err := h.NodeHost().StaleRead(shard, &wire.Request{Op: wire.OpLockInfo, Path: p})
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*wire.Response)
		if len(r.Holders) != 1 || r.Holders[0].Token != tok {
			t.Fatalf("%s on the restarted replica: %+v, want token %d", p, r.Holders, tok)
		}
	}
}
