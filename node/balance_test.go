package node_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
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

// TestLeadersBalancedWithoutLocalReplicas: 5 nodes, 3 replicas per data
// shard (shard s on nodes s-1, s, s+1, mod 5), and node 5, which holds no
// replica of shards 2 and 3, leads the meta group. An operator connected to
// node 5 only piles the leaderships of shards 2, 3 and 6 onto node 2 with
// shard.transfer (node 5 forwards the transfers of shards 2 and 3 to nodes
// that hold them); then node 5's leader balancer spreads the leaders, one
// per node, which needs at least one of shards 2 and 3 moved off node 2: a
// transfer node 5 can only start through another node.
func TestLeadersBalancedWithoutLocalReplicas(t *testing.T) {
	rec := &logRecorder{}
	c := nodetest.Start(t, nodetest.Options{Nodes: 5, Shards: 5, Edit: func(cfg *node.Config) {
		cfg.Replicas = 3
		cfg.NoLeaderBalance = true // the operator phase first
		cfg.Log = slog.New(&recordingHandler{rec: rec, node: cfg.ID, base: cfg.Log.Handler()})
	}})
	for _, id := range []uint64{2, 3} {
		if _, ok := c.Nodes[4].Host.Shard(id); ok {
			t.Fatalf("node 5 holds a replica of shard %d; the layout this test needs changed", id)
		}
	}
	// Node 5 leads the meta group: it answers for the table and, once on,
	// is the node that balances.
	keepMetaOn5 := func() error {
		if lead := metaLeader(t, c); lead != 4 {
			c.Nodes[lead].Host.TransferLeader(placement.MetaShard, 5)
			return fmt.Errorf("node %d leads the meta group", lead+1)
		}
		return nil
	}
	c.WaitFor(60*time.Second, "node 5 leads the meta group", keepMetaOn5)

	ctx := ctxT(t, 300*time.Second)
	op, err := client.New(ctx, []string{c.Cfgs[4].ClientAddr}, client.WithRequestTimeout(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	for _, bad := range []struct {
		shard, node uint64
		why         string
	}{{2, 5, "node 5 holds no replica of shard 2"}, {99, 1, "no shard 99"}, {2, 0, "no node"}} {
		if err := op.TransferLeader(ctx, bad.shard, bad.node); !errors.Is(err, wire.ErrInvalidArgument) {
			t.Fatalf("transfer of shard %d to node %d (%s): %v, want InvalidArgument", bad.shard, bad.node, bad.why, err)
		}
	}
	piled := []uint64{2, 3, 6}
	asked := map[uint64]time.Time{}
	c.WaitFor(120*time.Second, "shards 2, 3 and 6 led by node 2", func() error {
		for _, s := range piled {
			if c.LeaderOf(s) == 1 {
				continue
			}
			// Transfers are best effort (a lagging target or an
			// election defeats one): ask again now and then until
			// it holds.
			if time.Since(asked[s]) > 3*time.Second {
				asked[s] = time.Now()
				if err := op.TransferLeader(ctx, s, 2); err != nil {
					return fmt.Errorf("transfer shard %d: %v", s, err)
				}
			}
			return fmt.Errorf("shard %d led by node %d", s, c.LeaderOf(s)+1)
		}
		return nil
	})
	if n := rec.count("admin: machines", 5); n < len(piled) {
		t.Fatalf("node 5 audited %d admin requests, want at least %d", n, len(piled))
	}

	c.Nodes[4].Host.SetLeaderBalance(true) // only node 5 balances
	c.WaitFor(240*time.Second, "one leader per node", func() error {
		if err := keepMetaOn5(); err != nil {
			return err
		}
		count := map[int]int{}
		for _, id := range c.ShardIDs() {
			count[c.LeaderOf(id)]++
		}
		for i := 0; i < 5; i++ {
			if count[i] != 1 {
				return fmt.Errorf("leaders per node index: %v", count)
			}
		}
		return nil
	})
	remote := 0
	for _, s := range rec.shardsMoved(5) {
		if _, local := c.Nodes[4].Host.Shard(s); !local {
			remote++
		}
	}
	if remote == 0 {
		t.Fatalf("node 5 moved the leaderships of shards %v, none of a shard it holds no replica of", rec.shardsMoved(5))
	}
	t.Logf("node 5 moved shard leaderships %v (%d without a local replica)", rec.shardsMoved(5), remote)
}

// logRecorder keeps the log records the leader tests look for.
type logRecorder struct {
	mu      sync.Mutex
	records []loggedRecord
}

type loggedRecord struct {
	node  uint64
	msg   string
	shard uint64
}

func (r *logRecorder) count(msg string, node uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.records {
		if rec.msg == msg && rec.node == node {
			n++
		}
	}
	return n
}

func (r *logRecorder) shardsMoved(node uint64) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []uint64
	for _, rec := range r.records {
		if rec.msg == "moving shard leadership" && rec.node == node {
			out = append(out, rec.shard)
		}
	}
	return out
}

// recordingHandler records leader moves and machine admin audit lines, and
// passes everything on to the test's own handler.
type recordingHandler struct {
	rec  *logRecorder
	node uint64
	base slog.Handler
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "moving shard leadership" || r.Message == "admin: machines" {
		lr := loggedRecord{node: h.node, msg: r.Message}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "shard" {
				lr.shard = a.Value.Uint64()
			}
			return true
		})
		h.rec.mu.Lock()
		h.rec.records = append(h.rec.records, lr)
		h.rec.mu.Unlock()
	}
	if h.base.Enabled(ctx, r.Level) {
		return h.base.Handle(ctx, r)
	}
	return nil
}

func (h *recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordingHandler{rec: h.rec, node: h.node, base: h.base.WithAttrs(as)}
}

func (h *recordingHandler) WithGroup(name string) slog.Handler {
	return &recordingHandler{rec: h.rec, node: h.node, base: h.base.WithGroup(name)}
}
