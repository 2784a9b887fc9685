package node_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
)

// TestDirectRoutingFollowsLeaderChange: a client that routes directly sends
// blocking acquires (and releases) to the shard leader's node. After the
// leadership moves, the old leader forwards the next request and names the
// new leader in its answer; from then on the client goes to the new leader,
// without waiting for a table refresh (set to an hour here, so only the
// answers can teach it). Before the fix every request after the move was
// forwarded by the old leader until the next refresh.
func TestDirectRoutingFollowsLeaderChange(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Shards: 1, Edit: func(cfg *node.Config) {
		cfg.NoLeaderBalance = true // the test moves the leadership itself
	}})
	shard := c.ShardIDs()[0]
	ctx := ctxT(t, 120*time.Second)
	cl, err := client.New(ctx, c.Endpoints(), client.WithRouteRefresh(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := cl.NewSession(ctx, client.WithTTL(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	forwarded := func() (n uint64) {
		for _, nd := range c.Nodes {
			n += nd.Router.Forwarded()
		}
		return n
	}
	cycles := func(n int) uint64 {
		t.Helper()
		before := forwarded()
		for i := 0; i < n; i++ {
			m := client.NewMutex(s, "/locks/route/a")
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return forwarded() - before
	}
	// Warm up: the table is read and the direct connection dialled (the
	// first requests may go through the pool, and be forwarded).
	cycles(30)
	if n := cycles(30); n != 0 {
		t.Fatalf("before the move, %d of 60 requests were forwarded; want all sent to the leader", n)
	}

	old := c.LeaderOf(shard)
	to := (old + 1) % len(c.Nodes)
	// A leadership transfer is a request Raft may drop (the target was not
	// caught up when it arrived, or the timeout-now message was lost): ask
	// again until every node sees the new leader.
	seen := func() error {
		for i, nd := range c.Nodes {
			if l := nd.Host.Leader(shard); l != uint64(to+1) {
				return fmt.Errorf("node %d sees leader %d, want %d", i+1, l, to+1)
			}
		}
		return nil
	}
	movedWithin := func(d time.Duration) bool {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if seen() == nil {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		err := c.Nodes[old].Host.TransferLeadership(ctx, shard, uint64(to+1))
		if err == nil && movedWithin(3*time.Second) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leadership did not move from node %d to %d: transfer: %v; %v", old+1, to+1, err, seen())
		}
	}

	first := cycles(30) // the first is forwarded; then a dial to the new leader
	if n := cycles(30); n != 0 {
		t.Fatalf("after the leader moved from node %d to %d, %d of the next 60 requests were forwarded "+
			"(%d in the 60 before); want none once the client heard of the new leader", old+1, to+1, n, first)
	}
	if first == 0 {
		t.Fatalf("no request was forwarded after the move: the test did not exercise a stale leader view")
	}
}
