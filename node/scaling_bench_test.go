package node_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
)

// BenchmarkShardLeaders spreads the same closed-loop load (64 workers doing
// acquire+release cycles on their own namespaces) over 1, 2, 4 and 8 shard
// leaders, on 3 and 5 in-process nodes, 3 replicas per shard, leaders
// placed round-robin over the nodes. Each configuration runs for
// WARDEN_SCALING_SECONDS (default 5) regardless of b.N and reports ops/s,
// CPU per op (the whole process: servers and clients), WAL bytes per op
// (growth of every node's Raft directory) and, once per node count, heap
// bytes per held lock per replica. With WARDEN_SCALING_OUT set, the
// figures are appended to that file as a markdown table.
//
//	WARDEN_SCALING_OUT=$PWD/docs/bench/scaling.md \
//	  go test -run '^$' -bench BenchmarkShardLeaders -benchtime 1x ./node/
func BenchmarkShardLeaders(b *testing.B) {
	secs := 5
	if v, err := strconv.Atoi(os.Getenv("WARDEN_SCALING_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	out := os.Getenv("WARDEN_SCALING_OUT")
	var rows []scalingRow
	for _, nodes := range []int{3, 5} {
		for _, leaders := range []int{1, 2, 4, 8} {
			name := fmt.Sprintf("nodes=%d/leaders=%d", nodes, leaders)
			b.Run(name, func(b *testing.B) {
				r := runScaling(b, nodes, leaders, time.Duration(secs)*time.Second, leaders == 8)
				b.ReportMetric(r.opsPerSec, "ops/s")
				b.ReportMetric(r.cpuPerOp, "cpu-µs/op")
				b.ReportMetric(r.walPerOp, "wal-B/op")
				if r.bytesPerLock > 0 {
					b.ReportMetric(r.bytesPerLock, "heap-B/lock/replica")
				}
				rows = append(rows, r)
			})
		}
	}
	if out != "" && len(rows) > 0 {
		if err := writeScaling(out, rows, secs); err != nil {
			b.Fatal(err)
		}
	}
}

type scalingRow struct {
	nodes, leaders, workers int
	opsPerSec, cpuPerOp     float64
	walPerOp, bytesPerLock  float64
	leaderNodes, errors     int
}

const scalingWorkers = 64

func runScaling(b *testing.B, nodes, leaders int, d time.Duration, measureLocks bool) scalingRow {
	c := nodetest.Start(b, nodetest.Options{Nodes: nodes, Shards: leaders,
		Edit: func(cfg *node.Config) { cfg.Replicas = 3 }})
	spreadLeaders(b, c)
	ctx := context.Background()
	cl, err := client.New(ctx, c.AllEndpoints(), client.WithPoolSize(4))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	sessions := make([]*client.Session, scalingWorkers)
	for i := range sessions {
		if sessions[i], err = cl.NewSession(ctx, client.WithTTL(60*time.Second)); err != nil {
			b.Fatal(err)
		}
	}
	wal0 := raftBytes(c)
	cpu0 := cpuTime()
	var ops, errs atomic.Int64
	stop := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < scalingWorkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				m := client.NewMutex(sessions[w], fmt.Sprintf("/scale/w%d/l%d", w, i%8))
				// A cycle that fails (an overloaded shared machine times a
				// proposal out) is not counted; the figures are successes.
				if err := m.Lock(ctx); err != nil {
					errs.Add(1)
					continue
				}
				if err := m.Unlock(ctx); err != nil {
					errs.Add(1)
					continue
				}
				ops.Add(2)
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	n := float64(ops.Load())
	r := scalingRow{nodes: nodes, leaders: leaders, workers: scalingWorkers, opsPerSec: n / elapsed.Seconds(),
		cpuPerOp: float64(cpuTime()-cpu0) / float64(time.Microsecond) / n,
		walPerOp: float64(raftBytes(c)-wal0) / n, leaderNodes: leaderNodes(c), errors: int(errs.Load())}
	if measureLocks {
		r.bytesPerLock = heapPerLock(b, cl, 20000)
	}
	for _, s := range sessions {
		s.Close(ctx)
	}
	return r
}

// spreadLeaders puts shard i's leadership on the i-th node holding a
// replica of it (round-robin), so k shards have k leaders on min(k, nodes)
// machines.
func spreadLeaders(b *testing.B, c *nodetest.Cluster) {
	ids := c.ShardIDs()
	want := map[uint64]uint64{}
	for i, id := range ids {
		want[id] = uint64(i%len(c.Nodes)) + 1
	}
	c.WaitFor(time.Minute, "leaders spread", func() error {
		bad := 0
		for _, id := range ids {
			cur := c.LeaderOf(id)
			if cur < 0 {
				bad++
				continue
			}
			h := c.Nodes[cur].Host
			if h.NodeID() == want[id] {
				continue
			}
			t := h.Table()
			si, _ := t.Shard(id)
			if !si.Has(want[id]) {
				// The round-robin node has no replica (5 nodes, 3 replicas):
				// any node of the shard not yet leading another will do.
				want[id] = si.Replicas[0]
				continue
			}
			h.NodeHost().RequestLeaderTransfer(id, si.RID(want[id]))
			bad++
		}
		if bad > 0 {
			return fmt.Errorf("%d shards not led where planned", bad)
		}
		return nil
	})
}

func leaderNodes(c *nodetest.Cluster) int {
	seen := map[int]bool{}
	for _, id := range c.ShardIDs() {
		seen[c.LeaderOf(id)] = true
	}
	return len(seen)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func raftBytes(c *nodetest.Cluster) int64 {
	var total int64
	for _, cfg := range c.Cfgs {
		filepath.WalkDir(filepath.Join(cfg.DataDir, "raft"), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if info, err := d.Info(); err == nil {
					total += info.Size()
				}
			}
			return nil
		})
	}
	return total
}

// heapPerLock holds n locks (one session) and returns the heap growth per
// lock per replica (every replica of the cluster lives in this process).
func heapPerLock(b *testing.B, cl *client.Client, n int) float64 {
	ctx := context.Background()
	s, err := cl.NewSession(ctx, client.WithTTL(120*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	before := heapInUse()
	var wg sync.WaitGroup
	var next, held atomic.Int64
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := client.NewMutex(s, fmt.Sprintf("/held/ns%d/lock-%d", i%512, i)).Lock(lctx)
				cancel()
				if err == nil {
					held.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	after := heapInUse()
	if held.Load() == 0 {
		return 0
	}
	return float64(after-before) / float64(held.Load()) / 3
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func writeScaling(path string, rows []scalingRow, secs int) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	var load [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &load[0], &load[1], &load[2])
	}
	fmt.Fprintf(f, "\n## Run %s: %d s per row, %d CPUs, load average %.2f at the end\n\n",
		time.Now().UTC().Format(time.RFC3339), secs, runtime.NumCPU(), load[0])
	fmt.Fprintln(f, "| nodes | shard leaders | machines leading | ops/s | CPU µs/op (whole process) | WAL bytes/op (all replicas) | heap bytes/lock/replica | failed cycles |")
	fmt.Fprintln(f, "|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		lock := "-"
		if r.bytesPerLock > 0 {
			lock = fmt.Sprintf("%.0f", r.bytesPerLock)
		}
		fmt.Fprintf(f, "| %d | %d | %d | %.0f | %.1f | %.0f | %s | %d |\n", r.nodes, r.leaders, r.leaderNodes, r.opsPerSec, r.cpuPerOp, r.walPerOp, lock, r.errors)
	}
	return nil
}
