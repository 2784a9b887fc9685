package node_test

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/shard"
)

// TestWALStoreKeepsLocksThroughSnapshotsAndRestart runs a cluster on
// Warden's own Raft log store with snapshots every few entries, so that the
// engine saves snapshots, compacts the log and the store drops segments;
// then restarts every node. A data dir keeps the store it was created
// with: asking for the other one is refused with ErrLogStoreMismatch.
func TestWALStoreKeepsLocksThroughSnapshotsAndRestart(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Edit: func(cfg *node.Config) {
		cfg.LogStore = shard.LogStoreWAL
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
	wrong := c.Cfgs[0]
	wrong.LogStore = shard.LogStorePebble
	if n, err := node.Start(wrong); !errors.Is(err, shard.ErrLogStoreMismatch) {
		if n != nil {
			n.Close()
		}
		t.Fatalf("pebble on a wal data dir: got %v, want ErrLogStoreMismatch", err)
	}
	for i := range c.Cfgs {
		c.Cfgs[i].LogStore = "" // the data dir's own
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
