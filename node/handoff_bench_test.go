package node_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/raftnode"
)

// BenchmarkHandoff runs the load generator's contended scenario in process:
// 32 workers (a session each, sharing 4 clients of 2 pooled connections)
// queue on one hot lock and release it at once, so every grant after the
// first is a hand-off (one Raft entry releases the holder and grants the
// next waiter). One op is one hand-off. Besides hand-offs/s (which depends
// on what else the machine runs) it reports what a hand-off costs in
// figures that hardly do: CPU time, Raft entries and client operations per
// entry, Raft messages and syscalls; and the hand-off gap (the holder's
// Unlock call to the next holder's Lock return: the serial chain that
// bounds hand-offs/s) next to the release round trip the holder sees.
func BenchmarkHandoff(b *testing.B) {
	const workers, path = 32, "/bench/hot/lock"
	c := nodetest.Start(b, nodetest.Options{Shards: 2})
	ctx := context.Background()
	sessions := benchSessions(b, c, workers)
	var (
		released  atomic.Int64 // when the current holder called Unlock (unix ns); 0 = none yet
		grants    atomic.Int64
		measuring atomic.Bool
		mu        sync.Mutex
		gaps      = hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
		rels      = hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	)
	run := func(limit int64) {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				// Past the limit every holder still releases, so the
				// workers left in the queue get their grant and stop.
				for grants.Load() < limit {
					m := client.NewMutex(sessions[w], path)
					if err := m.Lock(ctx); err != nil {
						b.Error(err)
						return
					}
					now := time.Now()
					grants.Add(1)
					prev := released.Load()
					t1 := time.Now()
					released.Store(t1.UnixNano())
					if err := m.Unlock(ctx); err != nil {
						b.Error(err)
						return
					}
					if measuring.Load() {
						mu.Lock()
						if prev != 0 {
							gaps.RecordValue(now.Sub(time.Unix(0, prev)).Microseconds())
						}
						rels.RecordValue(time.Since(t1).Microseconds())
						mu.Unlock()
					}
				}
			}(w)
		}
		wg.Wait()
	}
	run(int64(4 * workers)) // warm up: routes learned, connections dialled
	entries0, ops0 := raftEntries(c)
	rd0, wr0 := procIO()
	_, rm0, _ := raftnode.RaftTraffic()
	p0 := raftnode.Passes()
	cpu0 := cpuTime()
	grants.Store(0)
	released.Store(0)
	measuring.Store(true)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	run(int64(b.N))
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	rd1, wr1 := procIO()
	_, rm1, _ := raftnode.RaftTraffic()
	p1 := raftnode.Passes()
	entries1, ops1 := raftEntries(c)
	n := float64(grants.Load())
	b.ReportMetric(n/elapsed.Seconds(), "handoffs/s")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/handoff")
	b.ReportMetric(float64(entries1-entries0)/n, "entries/handoff")
	if entries1 > entries0 {
		b.ReportMetric(float64(ops1-ops0)/float64(entries1-entries0), "ops/entry")
	}
	b.ReportMetric(float64(rm1-rm0)/n, "raft-msgs/handoff")
	if held := p1.HeldCommits - p0.HeldCommits; held > 0 { // raftnode/commithold.go
		b.ReportMetric(float64(held)/n, "held-commits/handoff")
		b.ReportMetric(float64(p1.DroppedCommits-p0.DroppedCommits)/n, "dropped-commits/handoff")
	}
	b.ReportMetric(float64(rd1-rd0+wr1-wr0)/n, "syscalls/handoff")
	b.ReportMetric(float64(gaps.ValueAtQuantile(50)), "gap-p50-µs")
	b.ReportMetric(float64(rels.ValueAtQuantile(50)), "release-p50-µs")
	for _, s := range sessions {
		s.Close(ctx)
	}
}
