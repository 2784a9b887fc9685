package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/wire"
)

// TestWatchOnAReplicaThatCatchesUpFromASnapshot: a watch served by a
// follower's replica stays whole when that follower, cut off while the
// others snapshot and compact their logs, comes back behind the compacted
// log and installs the leader's snapshot. The replica never applies the
// entries the snapshot covers, so its feed never sees their events: the
// watch must be told (and resume elsewhere), not skip them.
func TestWatchOnAReplicaThatCatchesUpFromASnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := StartCluster(ctx, Options{Nodes: 3, Shards: 1, Binary: wardenBin, Dir: t.TempDir(), SnapshotLogBytes: "64KiB"},
		NewEventLog(testLogWriter{t}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitHealthy(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	const path = "/snapwatch/kv/key"
	shard, err := c.ShardOf(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	leader := c.Leader(ctx, shard)
	if leader < 0 {
		t.Fatal("no leader")
	}
	follower := (leader + 1) % 3
	writer, err := client.New(ctx, c.ClientAddrs())
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	// The watch goes to the follower only, and its replica serves it.
	watcher, err := client.New(ctx, []string{c.Nodes[follower].ClientAddr}, client.WithoutDirectRouting())
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	value := make([]byte, 2000)
	put := func(i int) {
		t.Helper()
		value[0] = byte(i)
		if _, err := writer.Put(ctx, path, value); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	put(0)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	versions := make(chan uint64, 1024)
	go func() {
		defer close(versions)
		for wr := range watcher.Watch(wctx, path) {
			if wr.Err != nil {
				return
			}
			for _, ev := range wr.Events {
				if ev.Kind == wire.EvKVPut {
					versions <- ev.Version
				}
			}
		}
	}()
	put(1) // the watch is live: its events arrive (put 0's too, if the follower applied it after the watch began)
	if v := <-versions; v == 1 {
		if v = <-versions; v != 2 {
			t.Fatalf("second event: version %d, want 2", v)
		}
	} else if v != 2 {
		t.Fatalf("first event: version %d, want 1 or 2", v)
	}

	c.Isolate(follower)
	const n = 200 // 400 KB of values: six times the log the others keep
	for i := 2; i < n; i++ {
		put(i)
	}
	c.Heal()
	deadline := time.After(90 * time.Second)
	for want := uint64(3); want <= n; want++ {
		select {
		case v, ok := <-versions:
			if !ok {
				t.Fatalf("the watch ended before version %d", want)
			}
			if v != want {
				t.Fatalf("watch delivered version %d where %d was due: it skipped what the snapshot covered", v, want)
			}
		case <-deadline:
			t.Fatalf("version %d never came", want)
		}
	}
	st, err := c.Status(ctx, follower)
	if err != nil {
		t.Fatal(err)
	}
	var recovered uint64
	for _, sh := range st.Shards {
		if sh.ID == shard {
			recovered = sh.SnapshotsRecovered
		}
	}
	if recovered == 0 {
		t.Fatalf("node %d never recovered from a snapshot: the test did not cut it off long enough", follower+1)
	}
}
