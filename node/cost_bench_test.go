package node_test

import (
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/raftnode"
)

// BenchmarkCycleCost runs uncontended acquire+release cycles like the load
// generator's uncontended scenario (256 workers, each with its own session,
// sharing 4 clients of 2 pooled connections) against an in-process 3-node
// cluster, and reports what a cycle costs the whole process (client and
// the three nodes together) in figures that hardly depend on what else the
// machine runs: CPU time (cpu-µs/cycle), allocations (allocs/op), read and
// write syscalls (/proc/self/io), client operations per Raft entry, and
// goroutine runs and goroutines started (runtime/metrics): each run is a
// goroutine woken to take over work, the hand-offs a request costs.
// Throughput and latency are left to the load benchmark (make bench-load).
func BenchmarkCycleCost(b *testing.B) {
	for _, shards := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) { benchCycleCost(b, shards, 256) })
	}
}

func benchCycleCost(b *testing.B, shards, workers int) {
	o := nodetest.Options{Shards: shards}
	// Experiments with the pipeline (shard/proposer.go).
	inflight, _ := strconv.Atoi(os.Getenv("WARDEN_BENCH_INFLIGHT"))
	o.Edit = func(c *node.Config) { c.Shard.MaxInflight = inflight } // 0: the default
	c := nodetest.Start(b, o)
	ctx := context.Background()
	sessions := benchSessions(b, c, workers)
	paths := make([][]string, workers)
	for w := range paths {
		for i := 0; i < 16; i++ {
			paths[w] = append(paths[w], fmt.Sprintf("/bench/w%d-%d/lock", w, i))
		}
	}
	cycle := func(w, i int) error {
		m := client.NewMutex(sessions[w], paths[w][i%16])
		if err := m.Lock(ctx); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}
	// Warm up: direct routes learned, connections dialled, buffers grown.
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 4; i++ {
				if err := cycle(w, i); err != nil {
					b.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	entries0, ops0 := raftEntries(c)
	rd0, wr0 := procIO()
	rb0, rm0, rw0 := raftnode.RaftTraffic()
	runs0, started0 := schedCounts()
	cpu0 := cpuTime()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; next.Add(1) <= int64(b.N); i++ {
				if err := cycle(w, i); err != nil {
					b.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	b.StopTimer()
	cpu := cpuTime() - cpu0
	runs1, started1 := schedCounts()
	rd1, wr1 := procIO()
	rb1, rm1, rw1 := raftnode.RaftTraffic()
	entries1, ops1 := raftEntries(c)
	n := float64(b.N)
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/cycle")
	b.ReportMetric(float64(runs1-runs0)/n, "goroutine-runs/cycle")
	b.ReportMetric(float64(started1-started0)/n, "goroutines/cycle")
	b.ReportMetric(float64(rd1-rd0)/n, "reads/cycle")
	b.ReportMetric(float64(wr1-wr0)/n, "writes/cycle")
	b.ReportMetric(float64(rm1-rm0)/n, "raft-msgs/cycle")
	b.ReportMetric(float64(rb1-rb0)/n, "raft-batches/cycle")
	b.ReportMetric(float64(rw1-rw0)/n, "raft-writes/cycle")
	if entries1 > entries0 {
		b.ReportMetric(float64(ops1-ops0)/float64(entries1-entries0), "ops/entry")
	}
	for _, s := range sessions {
		s.Close(ctx)
	}
}

// raftEntries sums the entries proposed and the client operations in them
// over every data shard of every node.
func raftEntries(c *nodetest.Cluster) (entries, ops uint64) {
	for _, n := range c.Nodes {
		for _, id := range n.Host.ShardIDs() {
			if s, ok := n.Host.Shard(id); ok {
				e, o := s.Batches()
				entries += e
				ops += o
			}
		}
	}
	return entries, ops
}

// schedCounts is how many times goroutines went from runnable to running
// and how many were started, since the process started. The runtime
// samples the first in one of every gTrackingPeriod (8) transitions of each
// goroutine into its scheduling-latency histogram; the count is scaled
// back up, so it estimates all runs.
func schedCounts() (runs, started uint64) {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}, {Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		for _, c := range s[0].Value.Float64Histogram().Counts {
			runs += c
		}
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		started = s[1].Value.Uint64()
	}
	return runs * 8, started
}

// procIO is the process's read and write syscall counts (Linux; 0 elsewhere).
func procIO() (reads, writes uint64) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		switch {
		case !ok:
		case k == "syscr":
			reads = n
		case k == "syscw":
			writes = n
		}
	}
	return reads, writes
}

// BenchmarkIdleCost reports the CPU an idle in-process 3-node cluster
// burns (ticks, heartbeats, lessors): a fixed cost per shard that a
// loaded cluster pays too. One op = one second of idling.
func BenchmarkIdleCost(b *testing.B) {
	for _, shards := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			nodetest.Start(b, nodetest.Options{Shards: shards})
			time.Sleep(2 * time.Second) // elections and table installs settle
			cpu0 := cpuTime()
			b.ResetTimer()
			time.Sleep(time.Duration(b.N) * time.Second)
			b.StopTimer()
			b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cores")
		})
	}
}

// cpuTime is the CPU time this process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchSessions opens workers sessions over 4 clients of 2 pooled
// connections each (a load generator's shape), closed when b ends.
func benchSessions(b *testing.B, c *nodetest.Cluster, workers int) []*client.Session {
	ctx := context.Background()
	clients := make([]*client.Client, 4)
	for i := range clients {
		cl, err := client.New(ctx, c.AllEndpoints(), client.WithPoolSize(2), client.WithRequestTimeout(10*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cl.Close() })
		clients[i] = cl
	}
	sessions := make([]*client.Session, workers)
	for i := range sessions {
		var err error
		for try := 0; try < 5; try++ { // a starved machine times some out
			if sessions[i], err = clients[i%len(clients)].NewSession(ctx, client.WithTTL(30*time.Second)); err == nil {
				break
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return sessions
}
