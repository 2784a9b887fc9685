package node_test

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
)

// TestWALStoreKeepsLocksThroughSnapshotsAndRestart runs a cluster with
// snapshots every few entries, so that the engine saves snapshots, compacts
// the log and the Raft log store drops segments; then restarts every node.
func TestWALStoreKeepsLocksThroughSnapshotsAndRestart(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Edit: func(cfg *node.Config) {
		cfg.SnapshotEntries = 20
	}})
	ctx := ctxT(t, 120*time.Second)
	cl := newClient(t, c)
	s := session(t, cl, 30*time.Second)
	var tokens []uint64
	for i := 0; i < 10; i++ {
		m := client.NewMutex(s, fmt.Sprintf("/walstore/ns-%d/lock", i))
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, m.Token())
	}
	// Enough entries for several snapshots and compactions per shard.
	for i := 0; i < 150; i++ {
		if _, err := cl.Put(ctx, fmt.Sprintf("/walstore/kv-%d/key", i%7), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	c.StopAll()
	for i, cfg := range c.Cfgs {
		if !hasDir(t, cfg.DataDir, "wardenwal") {
			t.Fatalf("node %d: no wardenwal dir under %s", i+1, cfg.DataDir)
		}
	}
	for i := range c.Cfgs {
		c.StartNode(i)
	}
	c.WaitReady(60 * time.Second)
	for i := 0; i < 10; i++ {
		info, err := cl.LockInfo(ctx, fmt.Sprintf("/walstore/ns-%d/lock", i))
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Holders) != 1 || info.Holders[0].Token != tokens[i] {
			t.Fatalf("lock %d after restart: %+v (want token %d)", i, info, tokens[i])
		}
	}
	for k := 0; k < 7; k++ {
		kv, err := cl.Get(ctx, fmt.Sprintf("/walstore/kv-%d/key", k))
		last := 149 - (149-k)%7
		if err != nil || string(kv.Value) != fmt.Sprint(last) {
			t.Fatalf("kv %d after restart: %+v %v (want %d)", k, kv, err, last)
		}
	}
}

func hasDir(t *testing.T, root, name string) bool {
	found := false
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == name {
			found = true
		}
		return nil
	})
	return found
}

// TestLogBoundedByBytes: with an entry count no load reaches, every replica
// still snapshots and compacts its log once the entries it applied hold
// --snapshot-log-bytes, and the data survives a restart from those
// snapshots.
func TestLogBoundedByBytes(t *testing.T) {
	const limit = 256 << 10
	c := nodetest.Start(t, nodetest.Options{Shards: 1, Edit: func(cfg *node.Config) {
		cfg.SnapshotEntries = 1 << 30
		cfg.Shard.SnapshotLogBytes = limit
	}})
	ctx := ctxT(t, 120*time.Second)
	cl := newClient(t, c)
	value := make([]byte, 4000) // under the 4 KiB value limit
	// 4× the limit in values alone: at least three log-size snapshots.
	for i := 0; i < 4*limit/len(value); i++ {
		value[0] = byte(i)
		if _, err := cl.Put(ctx, fmt.Sprintf("/logbound/kv-%d/key", i%5), value); err != nil {
			t.Fatal(err)
		}
	}
	shardID := c.ShardIDs()[0]
	deadline := time.Now().Add(30 * time.Second)
	for i, n := range c.Nodes {
		for {
			s, ok := n.Host.Shard(shardID)
			if !ok {
				t.Fatalf("node %d has no replica of shard %d", i+1, shardID)
			}
			lr, err := n.Host.NodeHost().GetLogReader(shardID)
			if err != nil {
				t.Fatal(err)
			}
			first, last := lr.GetRange()
			saved, _ := s.Snapshots()
			if saved > 0 && first > 1 {
				// What came after the last snapshot (under the limit) and
				// a quarter of the limit behind it: about 1.25× the limit.
				if kept := last - first + 1; kept > (limit+limit/2)/uint64(len(value)) {
					t.Fatalf("node %d keeps entries %d..%d (%d) after a log-size snapshot", i+1, first, last, kept)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: %d log-size snapshots, log %d..%d: never compacted", i+1, saved, first, last)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	c.StopAll()
	for i := range c.Cfgs {
		c.StartNode(i)
	}
	c.WaitReady(60 * time.Second)
	n := 4 * limit / len(value)
	for k := 0; k < 5; k++ {
		kv, err := cl.Get(ctx, fmt.Sprintf("/logbound/kv-%d/key", k))
		last := n - 1 - (n-1-k)%5
		if err != nil || len(kv.Value) != len(value) || kv.Value[0] != byte(last) {
			t.Fatalf("kv %d after restart: %v (want the value written %dth)", k, err, last)
		}
	}
}
