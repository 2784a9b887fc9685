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
