package nodetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wardenlock/warden/node"
)

// AddNode starts a new node that joins the running cluster through the
// running nodes' client addresses, waits until it is admitted and sees
// itself in the table, and returns its index.
func (c *Cluster) AddNode() int {
	c.t.Helper()
	ports := FreePorts(c.t, 2)
	i := len(c.Cfgs)
	base := c.Cfgs[0]
	cfg := node.Config{
		ID: uint64(i + 1), DataDir: fmt.Sprintf("%s/../node%d", base.DataDir, i+1),
		ClientAddr: ports[0], RaftAddr: ports[1], Join: c.Endpoints(),
		DataShards: base.DataShards, Clock: base.Clock, Log: base.Log,
		SM: base.SM, Shard: base.Shard, Router: base.Router,
		RTT: base.RTT, ElectionRTT: base.ElectionRTT, HeartbeatRTT: base.HeartbeatRTT,
		ShardPolicy: base.ShardPolicy, Replicas: base.Replicas, CPU: base.CPU,
	}
	c.Cfgs = append(c.Cfgs, cfg)
	c.Nodes = append(c.Nodes, nil)
	c.StartNode(i)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Nodes[i].WaitJoined(ctx); err != nil {
		c.t.Fatalf("node %d did not join: %v", i+1, err)
	}
	c.WaitFor(60*time.Second, fmt.Sprintf("node %d in its own table", i+1), func() error {
		t := c.Nodes[i].Host.Table()
		if t == nil {
			return fmt.Errorf("no table")
		}
		if _, ok := t.Node(cfg.ID); !ok {
			return fmt.Errorf("not registered")
		}
		return nil
	})
	return i
}

// Forget stops node i and marks it gone (after it was removed from the
// cluster), so readiness no longer expects it.
func (c *Cluster) Forget(i int) {
	c.StopNode(i)
	if c.Gone == nil {
		c.Gone = map[int]bool{}
	}
	c.Gone[i] = true
}

// WaitFor polls cond until it returns nil, failing the test after timeout
// with cond's last error. (A liveness wait, not a timing assertion.)
func (c *Cluster) WaitFor(timeout time.Duration, what string, cond func() error) {
	c.t.Helper()
	WaitFor(c.t, timeout, what, cond)
}

// WaitFor is Cluster.WaitFor for any test, such as a subtest, which must
// fail itself rather than the test that started the cluster.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached after %v: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Running returns the index of some running node, -1 if none.
func (c *Cluster) Running() int {
	for i, n := range c.Nodes {
		if n != nil {
			return i
		}
	}
	return -1
}
