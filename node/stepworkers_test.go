package node_test

import (
	"testing"
	"time"

	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/shard"
)

// node.Config.StepWorkers (warden serve --step-workers) reaches dragonboat's
// engine on every node, and a cluster run with one step worker per shard
// serves locks; 0 gives a new data dir shard.DefaultStepWorkers.
func TestStepWorkersReachTheEngine(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Shards: 3, Edit: func(cfg *node.Config) {
		if cfg.ID != 3 {
			cfg.StepWorkers = 4
		}
	}})
	for i, n := range c.Nodes {
		want := uint64(4)
		if i == 2 {
			want = shard.DefaultStepWorkers // StepWorkers 0: a new dir's default
		}
		eng := n.Host.NodeHost().NodeHostConfig().Expert.Engine
		if eng.ExecShards != want || eng.CommitShards != want {
			t.Fatalf("node %d: %d step and %d commit workers, want %d", i+1, eng.ExecShards, eng.CommitShards, want)
		}
	}
	cl := newClient(t, c)
	ctx := ctxT(t, 60*time.Second)
	for _, p := range []string{"/locks/a/x", "/locks/b/x", "/locks/c/x", "/locks/d/x"} {
		l, err := cl.Acquire(ctx, p, time.Minute)
		if err != nil {
			t.Fatalf("acquire %s: %v", p, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %s: %v", p, err)
		}
	}
}
