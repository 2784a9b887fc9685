package node_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
)

// BenchmarkAcquireRelease measures uncontended acquire+release cycles over
// TCP against a local 3-node cluster (3 replicas per shard, in one process),
// with 64 concurrent workers on distinct paths of one session each. It
// reports cycles/s (two quorum-committed operations each) and the latency of
// one cycle.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, workers := range []int{1, 64} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			benchCycles(b, workers)
		})
	}
}

func benchCycles(b *testing.B, workers int) {
	c := nodetest.Start(b, nodetest.Options{Shards: 8})
	ctx := context.Background()
	cl, err := client.New(ctx, c.AllEndpoints(), client.WithPoolSize(4))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	sessions := make([]*client.Session, workers)
	for i := range sessions {
		if sessions[i], err = cl.NewSession(ctx, client.WithTTL(30*time.Second)); err != nil {
			b.Fatal(err)
		}
	}
	hist := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	var mu sync.Mutex
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			local := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
			for i := 0; ; i++ {
				if next.Add(1) > int64(b.N) {
					break
				}
				m := client.NewMutex(sessions[w], fmt.Sprintf("/bench/w%d-%d/lock", w, i%16))
				t0 := time.Now()
				if err := m.Lock(ctx); err != nil {
					b.Error(err)
					return
				}
				if err := m.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
				local.RecordValue(time.Since(t0).Microseconds())
			}
			mu.Lock()
			hist.Merge(local)
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cycles/s")
	b.ReportMetric(float64(2*b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(hist.ValueAtQuantile(50)), "p50-µs")
	b.ReportMetric(float64(hist.ValueAtQuantile(99)), "p99-µs")
	for _, s := range sessions {
		s.Close(ctx)
	}
}
