package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4"

	"github.com/wardenlock/warden/audit"
	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/internal/diskfs/crashfs"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
)

// TestAuditRecordsSurviveACrashAcrossASnapshot: the audit store keeps no
// log, so a process crash loses the records still in its memtable. Those
// of entries a snapshot covers must survive (the restarted replica never
// applies them again); those of later entries come back when it replays
// its Raft log. The audit store of one node runs on a file system that
// loses power (crashfs): what was not synced is gone.
func TestAuditRecordsSurviveACrashAcrossASnapshot(t *testing.T) {
	disks := map[uint64]*crashfs.FS{}
	c := nodetest.Start(t, nodetest.Options{Shards: 1, Edit: func(cfg *node.Config) {
		disks[cfg.ID] = crashfs.New()
		cfg.Audit.Dir, cfg.Audit.FS = "audit", disks[cfg.ID].VFS()
	}})
	cl := newClient(t, c)
	ctx := ctxT(t, 120*time.Second)
	const p = "/locks/crash/x"
	shardID := mustLocate(t, c, p)
	cycles := func(n int) {
		for i := 0; i < n; i++ {
			l, err := cl.Acquire(ctx, p, time.Minute, client.WithOwner(fmt.Sprintf("owner-%d", i)))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	const k = 1 // the node that crashes
	cycles(20)
	store := c.Nodes[k].Audit
	store.Sync()
	beforeSnapshot := store.Newest(shardID)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := c.Nodes[k].Host.NodeHost().SyncRequestSnapshot(sctx, shardID, dragonboat.SnapshotOption{}); err != nil {
		t.Fatal(err)
	}
	cycles(20)
	waitUntil(t, "the crashing node to apply every cycle", func() bool {
		store.Sync()
		return store.Newest(shardID) >= beforeSnapshot+40
	})
	want := history(t, store, shardID)

	st := disks[uint64(k+1)].Capture()
	c.StopNode(k)
	img := st.Image(crashfs.Synced, nil)
	c.Cfgs[k].Audit.FS = img.VFS()

	s, err := audit.Open(audit.Options{Dir: "audit", FS: img.VFS(), SweepEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	survived := s.Newest(shardID)
	s.Close()
	t.Logf("durable at the snapshot: %d of %d revisions (at least %d)", survived, len(want), beforeSnapshot)
	if survived < beforeSnapshot {
		t.Fatalf("records up to revision %d, before the snapshot, were lost in the crash (%d kept)", beforeSnapshot, survived)
	}
	if survived >= uint64(len(want)) {
		t.Fatalf("nothing was lost in the crash (%d of %d kept): the test shows nothing", survived, len(want))
	}

	c.StartNode(k)
	store = c.Nodes[k].Audit
	waitUntil(t, "the restarted node to replay its log", func() bool {
		store.Sync()
		return store.Newest(shardID) >= uint64(len(want))
	})
	if got := history(t, store, shardID)[:len(want)]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("history after the crash and replay:\n%v\nwant\n%v", got, want)
	}
}

// history is a shard's whole recorded history, one line per event.
func history(t *testing.T, s *audit.Store, shard uint64) []string {
	t.Helper()
	evs, err := s.History(shard, 1, s.Newest(shard), 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, ev := range evs {
		if ev.Rev != uint64(i+1) {
			t.Fatalf("history has a gap: event %d is revision %d", i, ev.Rev)
		}
		out = append(out, fmt.Sprintf("%d %v %v %s %d %s", ev.Rev, ev.Kind, ev.Cause, ev.Path, ev.Token, ev.Owner))
	}
	return out
}
