package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// Machines come and go under load: a 4th node joins a 3-node cluster, a
// shard replica moves onto it (from the shard's leader), the node that gave
// it up is drained and removed, while register clients lock, release, read
// and keep alive through every node. The whole history must be
// linearizable (no double grant, tokens strictly increasing per path), and
// locks taken before the changes must still be held, with their tokens,
// afterwards.
func TestReplicaMoveDrainRemoveUnderTraffic(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	admin := newClient(t, c)
	kept := holdLocks(t, ctx, admin, 12)

	four := c.AddNode()
	fourID := c.Cfgs[four].ID

	// Traffic through every node, the new one included.
	reg := startRegister(t, ctx, c.Endpoints(), 7)

	// Move a replica of the shard the register's first namespace lives on,
	// away from its leader (so the move also hands leadership over).
	table := c.Nodes[0].Host.Table()
	r, err := table.Locate("/reg/r0/a")
	if err != nil {
		t.Fatal(err)
	}
	moved := r.Shard
	from := c.Cfgs[leaderIndex(t, c, moved)].ID
	// A watch served by the source's own replica: it must survive the move
	// (ended with a retryable code, resumed through another replica).
	watchPath := pathOnShard(t, table, moved)
	wcl, err := client.New(ctx, []string{c.Cfgs[from-1].ClientAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	wch := wcl.Watch(ctx, watchPath, client.WithPrefix())
	if _, err := wcl.Put(ctx, watchPath+"/k", []byte("before")); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, wch, "before")

	if err := admin.MoveReplica(ctx, moved, from, fourID); err != nil {
		t.Fatalf("move shard %d from %d to %d: %v", moved, from, fourID, err)
	}
	waitPlacement(t, c, "replica move", func(tab *placement.Table) error {
		si, _ := tab.Shard(moved)
		if len(tab.Moves) > 0 || !si.Has(fourID) || si.Has(from) {
			return fmt.Errorf("shard %d replicas %v, moves %v", moved, si.Replicas, tab.Moves)
		}
		return nil
	})
	c.WaitFor(time.Minute, "source replica stopped", func() error {
		if _, ok := c.Nodes[from-1].Host.Shard(moved); ok {
			return fmt.Errorf("node %d still runs a replica of shard %d", from, moved)
		}
		return nil
	})

	if _, err := wcl.Put(ctx, watchPath+"/k", []byte("after")); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, wch, "after")

	// Drain the node that gave the replica up, then remove it.
	if err := admin.NodeDrain(ctx, from); err != nil {
		t.Fatal(err)
	}
	waitPlacement(t, c, "drain", func(tab *placement.Table) error {
		if n := tab.ReplicaCount(from); n > 0 || len(tab.Moves) > 0 {
			return fmt.Errorf("node %d still holds %d replicas (moves %v)", from, n, tab.Moves)
		}
		return nil
	})
	if err := admin.NodeRemove(ctx, from); err != nil {
		t.Fatalf("remove node %d: %v", from, err)
	}
	waitPlacement(t, c, "remove", func(tab *placement.Table) error {
		if _, ok := tab.Node(from); ok {
			return fmt.Errorf("node %d still registered", from)
		}
		return nil
	})
	// Let traffic run on the new layout for a moment before stopping it.
	time.Sleep(time.Second)
	reg.stop()
	c.Forget(int(from - 1))

	// The meta group kept three voters: the new node replaced the removed one.
	survivor := c.Nodes[c.Running()]
	mctx, mcancel := context.WithTimeout(ctx, 10*time.Second)
	mem, err := survivor.Host.NodeHost().SyncGetShardMembership(mctx, placement.MetaShard)
	mcancel()
	if err != nil {
		t.Fatal(err)
	}
	if len(mem.Nodes) != 3 {
		t.Fatalf("meta group has %d voters after the remove, want 3: %v", len(mem.Nodes), mem.Nodes)
	}
	for rid := range mem.Nodes {
		if placement.NodeOf(rid) == from {
			t.Fatalf("removed node %d is still a meta voter", from)
		}
	}

	// Every shard: three replicas, none on the removed node, a leader, each
	// replica applying (a follower may lag the quorum for a moment).
	after := newClient(t, c)
	c.WaitFor(30*time.Second, "shard view after the remove", func() error {
		shards, err := after.Shards(ctx)
		if err != nil {
			return err
		}
		for _, s := range shards {
			if len(s.Replicas) != 3 || s.Leader == 0 {
				return fmt.Errorf("shard %d: %d replicas, leader %d: %+v", s.ID, len(s.Replicas), s.Leader, s.Replicas)
			}
			for _, rv := range s.Replicas {
				if rv.Node == from {
					return fmt.Errorf("shard %d still lists removed node %d", s.ID, from)
				}
				if rv.Applied == 0 || rv.Error != "" {
					return fmt.Errorf("shard %d replica on node %d: applied %d, error %q", s.ID, rv.Node, rv.Applied, rv.Error)
				}
			}
		}
		return nil
	})

	// Acknowledged state is visible afterwards: the locks taken before the
	// changes, and (as reads appended to the history) the register's; the
	// history is linearizable, and the cluster still grants, with tokens
	// above everything before.
	keptLocksHold(t, ctx, after, kept)
	ops, unknown := reg.check(t, ctx, after)
	if ops < 100 {
		t.Fatalf("only %d register operations ran", ops)
	}
	t.Logf("%d register operations (%d unknown outcome) linearizable across join, move, drain, remove", ops, unknown)
	keptLocksAdvance(t, ctx, after, kept)
}

// holdLocks takes n locks on single-lock leases with a long TTL, spread
// over namespaces (so over shards), and returns path → token.
func holdLocks(t *testing.T, ctx context.Context, cl *client.Client, n int) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("/keep/n%d/lock", i)
		resp, err := cl.Do(ctx, &wire.Request{Op: wire.OpAcquire, Path: p, TTL: 600000, Owner: "keeper"})
		if err != nil {
			t.Fatalf("acquire %s: %v", p, err)
		}
		out[p] = resp.Token
	}
	return out
}

func leaderIndex(t *testing.T, c *nodetest.Cluster, shard uint64) int {
	t.Helper()
	var i int
	c.WaitFor(30*time.Second, fmt.Sprintf("a leader of shard %d", shard), func() error {
		if i = c.LeaderOf(shard); i < 0 {
			return fmt.Errorf("no leader")
		}
		return nil
	})
	return i
}

// waitPlacement waits until cond holds on the table a running node reads
// from the meta group.
func waitPlacement(t *testing.T, c *nodetest.Cluster, what string, cond func(*placement.Table) error) {
	t.Helper()
	c.WaitFor(2*time.Minute, what, func() error {
		n := c.Nodes[len(c.Nodes)-1] // the node that joined last: never the one removed here
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		tab, err := n.Host.RefreshTable(ctx)
		if err != nil {
			return err
		}
		return cond(tab)
	})
}

// pathOnShard returns a namespace path the table places on shard.
func pathOnShard(t *testing.T, tab *placement.Table, shard uint64) string {
	t.Helper()
	for i := 0; i < 1000; i++ {
		p := fmt.Sprintf("/watched/n%d", i)
		if r, err := tab.Locate(p); err == nil && r.Shard == shard {
			return p
		}
	}
	t.Fatalf("no namespace found on shard %d", shard)
	return ""
}

// expectEvent reads watch responses until one carries value (errors are
// the client's resumptions, reported but not fatal).
func expectEvent(t *testing.T, ch <-chan client.WatchResponse, value string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case wr, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed before the %q event", value)
			}
			if wr.Err != nil {
				t.Logf("watch: %v", wr.Err)
			}
			for _, ev := range wr.Events {
				if string(ev.Value) == value {
					return
				}
			}
		case <-timeout:
			t.Fatalf("no watch event with %q", value)
		}
	}
}
