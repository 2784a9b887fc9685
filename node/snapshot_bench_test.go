package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
)

// BenchmarkSnapshotSave times one whole dragonboat snapshot of a data shard
// on a real disk (our encoding, the snapshot file and its fsync, dragonboat's
// directory syncs, flag files and LogDB record), with the state a shard
// holds under the benchmark's load: 1024 single-lock leases, each holding
// a lock. A replica pauses its applies only for the encoding. One node, so the
// syscalls seen under strace are this replica's; one acquire and release
// between snapshots so each is new.
func BenchmarkSnapshotSave(b *testing.B) {
	c := nodetest.Start(b, nodetest.Options{Nodes: 1, Shards: 1})
	shard := c.ShardIDs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := client.New(ctx, c.Endpoints())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	for j := 0; j < 1024; j++ {
		if _, err := cl.Acquire(ctx, fmt.Sprintf("/bench/w%d/p%d", j, j%16), time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	nh := c.Nodes[0].Host.NodeHost()
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		l, err := cl.Acquire(ctx, "/bench/step/x", time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = nh.SyncRequestSnapshot(sctx, shard, dragonboat.SnapshotOption{})
		scancel()
		total += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/snapshot")
}
