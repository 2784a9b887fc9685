package node_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
	"github.com/wardenlock/warden/shard"
)

// BenchmarkShardLeaders measures what spreading the same load over more
// shard leaders buys: 1, 2, 4 and 8 data shards (one leader each, spread
// round-robin over the nodes by leader transfer) on 3 and 5 in-process
// nodes, 3 replicas per shard.
//
// The load is fixed: scalingWorkers closed-loop workers, each with one
// operation in flight (acquire, then release, on namespaces spread over every
// range), run in a separate process (the test binary re-run as
// TestScalingLoad), so the benchmark process holds only the servers and its
// CPU time is the servers' CPU.
//
// Each leader's pipeline is bounded (WARDEN_SCALING_BATCH operations per
// Raft entry, default 8, and one entry in flight): a leader then commits
// at most BATCH operations per commit round trip (replication + fsync), the
// regime of a leader whose throughput is set by latency, not CPU. On this
// machine, whose cores every replica shares, that is the only regime where
// more leaders can mean more throughput; CPU per operation, measured at the
// same time, gives the CPU-bound ceiling per machine (docs/scaling.md).
// WARDEN_SCALING_BATCH=0 runs with the server's defaults (2048 operations,
// 32 entries in flight: one leader absorbs everything until CPU runs out).
//
// Each configuration runs WARDEN_SCALING_SECONDS (default 5) regardless of
// b.N. With WARDEN_SCALING_OUT set the figures are written to that file
// (markdown): `make bench-scaling` writes docs/bench/scaling.md.
func BenchmarkShardLeaders(b *testing.B) {
	secs := envInt("WARDEN_SCALING_SECONDS", 5)
	batch := envInt("WARDEN_SCALING_BATCH", 8)
	load0 := loadAvg()
	var rows []scalingRow
	for _, nodes := range []int{3, 5} {
		for _, leaders := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("nodes=%d/leaders=%d", nodes, leaders), func(b *testing.B) {
				r := runScaling(b, nodes, leaders, batch, time.Duration(secs)*time.Second)
				b.ReportMetric(r.opsPerSec, "ops/s")
				b.ReportMetric(r.serverCPUPerOp, "server-cpu-µs/op")
				b.ReportMetric(r.walPerOp, "wal-B/op")
				rows = append(rows, r)
			})
		}
	}
	if out := os.Getenv("WARDEN_SCALING_OUT"); out != "" && len(rows) > 0 {
		if err := writeScaling(out, rows, secs, batch, load0, loadAvg()); err != nil {
			b.Fatal(err)
		}
	}
}

type scalingRow struct {
	nodes, leaders, leaderNodes int
	opsPerSec                   float64
	perLeaderMin, perLeaderMax  float64 // ops/s committed by the least and the most busy leader
	serverCPUPerOp              float64 // µs, every replica of every node
	clientCPUPerOp              float64 // µs, the load process
	latencyMs                   float64 // mean per operation (Little's law: workers / throughput)
	opsPerEntry                 float64 // operations per Raft entry, over all leaders
	walPerOp                    float64 // bytes written to the Raft directories, all nodes
	errors                      int64
}

const scalingWorkers = 64

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

func runScaling(b *testing.B, nodes, leaders, batch int, d time.Duration) scalingRow {
	c := nodetest.Start(b, nodetest.Options{Nodes: nodes, Shards: leaders, Edit: func(cfg *node.Config) {
		cfg.Replicas = 3
		if batch > 0 {
			cfg.Shard = shard.Config{MaxBatchOps: batch, MaxInflight: 1}
		}
	}})
	spreadLeaders(b, c)
	ops0, entries0 := leaderOps(c)
	wal0 := raftBytes(c)
	cpu0 := cpuTime()
	res := runLoadProcess(b, c.AllEndpoints(), d)
	cpu := cpuTime() - cpu0
	n := float64(res.Ops)
	if n == 0 {
		b.Fatalf("no operation succeeded (%d failed)", res.Errors)
	}
	r := scalingRow{nodes: nodes, leaders: leaders, leaderNodes: leaderNodes(c), errors: res.Errors,
		opsPerSec:      n / res.Seconds,
		serverCPUPerOp: float64(cpu) / float64(time.Microsecond) / n,
		clientCPUPerOp: res.CPUSeconds * 1e6 / n,
		walPerOp:       float64(raftBytes(c)-wal0) / n}
	r.latencyMs = scalingWorkers / r.opsPerSec * 1000
	r.perLeaderMin, r.perLeaderMax = -1, 0
	ops1, entries1 := leaderOps(c)
	var dOps, dEntries uint64
	for id, after := range ops1 {
		dOps += after - ops0[id]
		dEntries += entries1[id] - entries0[id]
		v := float64(after-ops0[id]) / res.Seconds
		if r.perLeaderMin < 0 || v < r.perLeaderMin {
			r.perLeaderMin = v
		}
		r.perLeaderMax = max(r.perLeaderMax, v)
	}
	if dEntries > 0 {
		r.opsPerEntry = float64(dOps) / float64(dEntries)
	}
	return r
}

// leaderOps returns, per data shard, the operations its current leader's
// proposer has put into Raft entries, and the entries.
func leaderOps(c *nodetest.Cluster) (ops, entries map[uint64]uint64) {
	ops, entries = map[uint64]uint64{}, map[uint64]uint64{}
	for _, id := range c.ShardIDs() {
		if i := c.LeaderOf(id); i >= 0 {
			if s, ok := c.Nodes[i].Host.Shard(id); ok {
				entries[id], ops[id] = s.Batches()
			}
		}
	}
	return ops, entries
}

// loadResult is what the load process reports.
type loadResult struct {
	Ops, Errors         int64
	Seconds, CPUSeconds float64
}

// runLoadProcess runs TestScalingLoad in a child process against the
// cluster and returns its figures.
func runLoadProcess(b *testing.B, endpoints []string, d time.Duration) loadResult {
	cmd := exec.Command(os.Args[0], "-test.run=^TestScalingLoad$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "WARDEN_SCALING_LOAD="+strings.Join(endpoints, ","),
		"WARDEN_SCALING_DURATION="+d.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("load process: %v\n%s\n%s", err, out, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "SCALING "); ok {
			var r loadResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				b.Fatal(err)
			}
			return r
		}
	}
	b.Fatalf("the load process printed no result:\n%s", out)
	return loadResult{}
}

// TestScalingLoad is BenchmarkShardLeaders' load generator; it runs only
// when the benchmark starts it (WARDEN_SCALING_LOAD = endpoints).
func TestScalingLoad(t *testing.T) {
	eps := os.Getenv("WARDEN_SCALING_LOAD")
	if eps == "" {
		t.Skip("the load process of BenchmarkShardLeaders")
	}
	d, err := time.ParseDuration(os.Getenv("WARDEN_SCALING_DURATION"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl, err := client.New(ctx, strings.Split(eps, ","), client.WithPoolSize(4))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sessions := make([]*client.Session, scalingWorkers)
	for i := range sessions {
		if sessions[i], err = cl.NewSession(ctx, client.WithTTL(60*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	// Warm up: every worker's first namespaces, so routes and leases exist.
	cycle := func(w, i int) error {
		m := client.NewMutex(sessions[w], fmt.Sprintf("/scale/ns%d/lock-w%d", (w+i*scalingWorkers)%512, w))
		if err := m.Lock(ctx); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}
	for w := 0; w < scalingWorkers; w++ {
		cycle(w, 0)
	}
	var ops, errs atomic.Int64
	cpu0 := cpuTime()
	start := time.Now()
	stop := start.Add(d)
	var wg sync.WaitGroup
	for w := 0; w < scalingWorkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 1; time.Now().Before(stop); i++ {
				// A cycle that fails (a proposal timed out on a loaded
				// machine) is counted apart; the figures are successes.
				if err := cycle(w, i); err != nil {
					errs.Add(1)
					continue
				}
				ops.Add(2)
			}
		}(w)
	}
	wg.Wait()
	res := loadResult{Ops: ops.Load(), Errors: errs.Load(), Seconds: time.Since(start).Seconds(),
		CPUSeconds: (cpuTime() - cpu0).Seconds()}
	b, _ := json.Marshal(res)
	fmt.Printf("SCALING %s\n", b)
	for _, s := range sessions {
		s.Close(ctx)
	}
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
				// any node of the shard will do.
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

func loadAvg() float64 {
	var l float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &l)
	}
	return l
}

func writeScaling(path string, rows []scalingRow, secs, batch int, load0, load1 float64) error {
	var f bytes.Buffer
	fmt.Fprintf(&f, `# Scaling: the same load over more shard leaders

Produced by `+"`make bench-scaling`"+` (BenchmarkShardLeaders, node/scaling_bench_test.go).
%d closed-loop workers with one operation in flight each (acquire, then
release, on namespaces spread over every range), in a separate load process;
3 or 5 in-process nodes on 127.0.0.1 with 3 replicas per shard; shard leaders
spread round-robin over the nodes by leader transfer. `, scalingWorkers)
	if batch > 0 {
		fmt.Fprintf(&f, `Each leader's pipeline is
bounded to %d operations per Raft entry and one entry in flight, so a
leader's throughput is set by its commit round trip (replication and fsync)
as long as the machine has CPU to spare: then the figures show what spreading
over leaders buys. When the servers run out of CPU, the ops-per-entry and
CPU-per-op columns show what more, smaller batches cost instead.
`, batch)
	} else {
		fmt.Fprintf(&f, `Server defaults (2048 operations
per entry, 32 entries in flight): one leader absorbs the whole load until
the CPU runs out.
`)
	}
	fmt.Fprintf(&f, `
Server CPU is the benchmark process's (every replica of every node), client
CPU the load process's; per-leader throughput counts the operations each
leader put into Raft entries. See docs/scaling.md for the cost model.

## Run %s: %d s per row, %d CPUs, load average %.2f before and %.2f after

`, time.Now().UTC().Format(time.RFC3339), secs, runtime.NumCPU(), load0, load1)
	// The benchmark itself keeps the cores busy, so only the load it found
	// when it started says whether other work was competing.
	if load0 > float64(runtime.NumCPU()) {
		fmt.Fprintf(&f, "**Loaded machine**: the load average exceeded the %d cores when the run started; other jobs took CPU from this one, so throughput is lower (and CPU per operation higher) than on a quiet machine.\n\n", runtime.NumCPU())
	}
	fmt.Fprintln(&f, "| nodes | shard leaders | machines leading | ops/s | ops/s per leader (min–max) | ops per entry | mean latency ms | server CPU µs/op | client CPU µs/op | WAL bytes/op | failed cycles |")
	fmt.Fprintln(&f, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(&f, "| %d | %d | %d | %.0f | %.0f–%.0f | %.1f | %.1f | %.1f | %.1f | %.0f | %d |\n", r.nodes, r.leaders, r.leaderNodes,
			r.opsPerSec, r.perLeaderMin, r.perLeaderMax, r.opsPerEntry, r.latencyMs, r.serverCPUPerOp, r.clientCPUPerOp, r.walPerOp, r.errors)
	}
	return os.WriteFile(path, f.Bytes(), 0o644)
}
