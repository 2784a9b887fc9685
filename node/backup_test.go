package node_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wardenlock/warden/backup"
	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/placement"
)

// TestBackupWipeRestore takes a backup through the admin API, wipes every
// node's disk, restores the backup into a new cluster on the same
// addresses, and checks that the locks and KV of the backup are back, that
// what was written after the backup is not, and that every token issued
// after the restore is above every token issued before the wipe.
func TestBackupWipeRestore(t *testing.T) { backupWipeRestore(t, false) }

// TestBackupWipeRestoreAfterShardChanges: the same, on a cluster whose
// shards changed before the backup (shard 4 created, shard 2 retired, the
// locks and keys moved with their ranges): the restored cluster runs the
// backup's shards, 3 and 4, and never gives out an id used before.
func TestBackupWipeRestoreAfterShardChanges(t *testing.T) { backupWipeRestore(t, true) }

func backupWipeRestore(t *testing.T, reshape bool) {
	c := nodetest.Start(t, nodetest.Options{Edit: func(cfg *node.Config) { cfg.AdminAddr = "127.0.0.1:0" }})
	cl := newClient(t, c)
	ctx := ctxT(t, 120*time.Second)

	held := map[string]uint64{} // path → token at backup time
	for i := 0; i < 6; i++ {
		p := fmt.Sprintf("/locks/ns%d/job", i)
		l, err := cl.Acquire(ctx, p, 5*time.Minute, client.WithOwner(fmt.Sprintf("worker-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		held[p] = l.Token()
	}
	for i := 0; i < 4; i++ {
		if _, err := cl.Put(ctx, fmt.Sprintf("/cfg/ns%d/key", i), []byte(fmt.Sprintf("value-%d", i))); err != nil {
			t.Fatal(err)
		}
	}

	if reshape {
		h := c.Nodes[0].Host
		id, err := h.CreateShard(ctx, nil, true, "test")
		if err != nil || id != 4 {
			t.Fatalf("create: shard %d, %v", id, err)
		}
		waitShardState(t, c, 4, placement.ShardActive, 60*time.Second)
		if err := h.RetireShard(ctx, 2, "test"); err != nil {
			t.Fatal(err)
		}
		waitShardState(t, c, 2, placement.ShardRetired, 60*time.Second)
	}

	dir := filepath.Join(t.TempDir(), "backup")
	src := backup.HTTPSource{Base: "http://" + c.Nodes[0].Admin.Addr()}
	m, err := backup.Save(ctx, src, dir, backup.Options{FenceMargin: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	locks := 0
	for _, s := range m.Shards {
		locks += s.Locks
	}
	if len(m.Shards) != 2 || locks != len(held) || m.FenceMargin != 1<<30 || m.TableGen == 0 {
		t.Fatalf("manifest: %+v", m)
	}

	// Traffic after the backup: it is lost by the restore, but its tokens
	// must still be below every token the restored cluster issues.
	maxToken := uint64(0)
	for i := 0; i < 6; i++ {
		l, err := cl.Acquire(ctx, fmt.Sprintf("/locks/ns%d/late", i), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		maxToken = max(maxToken, l.Token())
	}
	if _, err := cl.Put(ctx, "/cfg/ns0/late", []byte("after")); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	// A damaged backup is refused before anything is touched.
	bad := t.TempDir()
	copyDir(t, dir, bad)
	f := filepath.Join(bad, m.Shards[0].File.Name)
	raw, _ := os.ReadFile(f)
	raw[len(raw)/2] ^= 0xff
	os.WriteFile(f, raw, 0o640)
	if _, err := backup.Load(bad); err == nil {
		t.Fatal("a corrupted dump passed verification")
	}

	// Disaster: every node and its disk are gone.
	c.StopAll()
	for _, cfg := range c.Cfgs {
		if err := os.RemoveAll(cfg.DataDir); err != nil {
			t.Fatal(err)
		}
		if _, err := node.PrepareRestore(dir, cfg.DataDir, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := node.PrepareRestore(dir, c.Cfgs[0].DataDir, 0, 0); err == nil {
		t.Fatal("a second restore into a prepared data dir was accepted")
	}
	for i := range c.Cfgs {
		c.StartNode(i)
	}
	c.WaitReady(60 * time.Second)
	waitRestored(t, c)
	if reshape {
		tab := tableOf(t, c)
		if ids := c.ShardIDs(); len(ids) != 2 || ids[0] != 3 || ids[1] != 4 || tab.NextShardID() != 5 {
			t.Fatalf("restored shards %v, next id %d; want [3 4] and 5", ids, tab.NextShardID())
		}
	}

	cl = newClient(t, c)
	for p, tok := range held {
		info, err := cl.LockInfo(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Holders) != 1 || info.Holders[0].Token != tok {
			t.Fatalf("%s after restore: %+v, want token %d", p, info.Holders, tok)
		}
		maxToken = max(maxToken, tok)
	}
	for i := 0; i < 4; i++ {
		kv, err := cl.Get(ctx, fmt.Sprintf("/cfg/ns%d/key", i))
		if err != nil || string(kv.Value) != fmt.Sprintf("value-%d", i) {
			t.Fatalf("kv %d after restore: %+v %v", i, kv, err)
		}
	}
	if _, err := cl.Get(ctx, "/cfg/ns0/late"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a key written after the backup survived the restore: %v", err)
	}
	for i := 0; i < 6; i++ {
		info, err := cl.LockInfo(ctx, fmt.Sprintf("/locks/ns%d/late", i))
		if !errors.Is(err, client.ErrNotFound) || len(info.Holders) != 0 {
			t.Fatalf("a lock granted after the backup survived the restore: %+v %v", info, err)
		}
		l, err := cl.Acquire(ctx, fmt.Sprintf("/locks/ns%d/new", i), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= maxToken {
			t.Fatalf("token %d after the restore is not above %d, the highest before", l.Token(), maxToken)
		}
	}
	// A restored lock is held: it still excludes others.
	if _, err := cl.Acquire(ctx, "/locks/ns0/job", time.Minute, client.WithTry()); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("restored lock is not held: %v", err)
	}
}

// waitRestored waits until every node has set its restore directory aside.
func waitRestored(t *testing.T, c *nodetest.Cluster) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, cfg := range c.Cfgs {
		for {
			_, err := os.Stat(filepath.Join(cfg.DataDir, node.RestoreDirName))
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d never finished its restore", cfg.ID)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
}
