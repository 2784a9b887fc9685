// Command benchscaling measures what spreading the same load over more
// shard leaders buys when every node has a machine's fixed CPU budget.
//
// Each node is its own `warden serve` process (loadtest/harness) inside its
// own CPU-limited cgroup (--cpu cores per --cpu-period), so a node stands
// for a small machine: one shard leader is bounded by its node's quota, and
// spreading leaders over nodes adds quota. The quotas together stay below
// the machine's cores, and the load generator (this process, outside every
// quota) drives the same closed-loop load (--clients workers, acquire then
// release, each on namespaces spread over every range) against 1, 2, 4 and
// 8 shard leaders on 3 and 5 nodes (3 replicas per shard, leaders spread
// over the nodes by leader transfer). Per row it records throughput,
// throughput per leader, operations per Raft entry, latency, each node's
// CPU against its quota and how often the quota stopped it, CPU per
// operation and WAL bytes per operation, and writes a markdown report.
// `make bench-scaling` runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/loadtest"
	"github.com/wardenlock/warden/loadtest/harness"
	"github.com/wardenlock/warden/raftnode"
)

type options struct {
	bin             string
	nodes, leaders  []int
	cpu             float64
	period          time.Duration
	weight          float64
	clients         int
	perLeader       int
	rounds          int
	duration        time.Duration
	warmup          time.Duration
	batch           int
	port            int
	args            []string
	appendOut       bool
	out             string
	maxTime         time.Duration
	profileDir      string
	perfEvents      string
	nodeArgs        []string // --node-args as given
	startedAt       time.Time
	loadBefore      float64
	disk            string // the disk probe, a sentence for the report
	stoppedEarlyErr error
}

func main() {
	var o options
	var nodes, leaders, args string
	flag.StringVar(&o.bin, "warden", "bin/warden", "warden binary")
	flag.StringVar(&o.out, "out", "build/bench/scaling.md", "markdown report to write (git-ignored)")
	flag.BoolVar(&o.appendOut, "append", false, "append this run to --out instead of replacing it")
	flag.StringVar(&nodes, "nodes", "3,5", "node counts")
	flag.StringVar(&leaders, "leaders", "1,2,4,8", "shard leader counts (one data shard each)")
	flag.Float64Var(&o.cpu, "cpu", 0.25, "CPU quota of every node, in cores (0: no cgroups, every node shares the machine)")
	flag.DurationVar(&o.period, "cpu-period", 10*time.Millisecond, "CFS period the quota is enforced over (short: small throttling bursts)")
	flag.Float64Var(&o.weight, "weight", 10, "with --cpu: CPU weight of every node and of the load generator, in ordinary processes (on a shared machine the nodes then get their quota before other work runs; 1: no preference)")
	flag.IntVar(&o.clients, "clients", 256, "closed-loop workers, one operation in flight each")
	flag.IntVar(&o.rounds, "rounds", 1, "run the whole sweep this many times, leader counts in reverse order every other round, and report each row's median over the rounds (the growth is read off the medians)")
	flag.IntVar(&o.perLeader, "clients-per-leader", 0, "> 0: instead of --clients, this many workers per shard leader (the load grows with the leaders)")
	flag.DurationVar(&o.duration, "duration", 15*time.Second, "measured time per row")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "load before measuring, per row")
	flag.IntVar(&o.batch, "batch", 0, "> 0: every leader puts at most this many operations in an entry, with one entry in flight (a latency-bound leader); 0: the server defaults")
	flag.IntVar(&o.port, "port", 29000, "first client port (each configuration of nodes and leaders uses 300 ports from here on, the same in every round; keep the whole range below 32768, where Linux's ephemeral ports begin)")
	flag.StringVar(&args, "node-args", "", "more flags for every node, space-separated")
	flag.StringVar(&o.profileDir, "profile-dir", "", "non-empty: run the nodes as `warden bench node` and write each node's CPU profile of the measured time there (<nodes>n-<leaders>l-node<i>.pprof)")
	flag.StringVar(&o.perfEvents, "perf-events", "", "non-empty: count these perf events (comma-separated, e.g. syscalls:sys_enter_fdatasync,sched:sched_switch) over every node's process during the measured time with `perf stat` and report them per operation")
	flag.DurationVar(&o.maxTime, "max-time", 0, "hard bound on the whole run (0: 12 minutes per round)")
	flag.Parse()
	o.rounds = max(o.rounds, 1)
	if o.maxTime <= 0 {
		o.maxTime = 12 * time.Minute * time.Duration(o.rounds)
	}
	o.nodes, o.leaders, o.nodeArgs = ints(nodes), ints(leaders), strings.Fields(args)
	o.args = slices.Clone(o.nodeArgs)
	// Leaders stay where the benchmark puts them.
	o.args = append(o.args, "--no-leader-balance")
	if o.batch > 0 {
		o.args = append(o.args, "--max-batch-ops", strconv.Itoa(o.batch), "--max-inflight-entries", "1")
	}
	os.Exit(run(o))
}

// run measures every row and writes the report; it returns the exit code.
func run(o options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.maxTime)
	defer cancel()
	o.startedAt, o.loadBefore = time.Now().UTC(), loadAvg()
	var m loadtest.Machine
	m.ProbeDisk(os.TempDir(), 2*time.Second) // the harness's data dirs are there
	o.disk = m.DiskLine()
	if o.cpu > 0 && o.weight != 1 {
		// The load generator gets the same weight (no quota): it must not be
		// the bound either.
		l, err := harness.NewCPULimit("loadgen", 0, o.period)
		if err == nil {
			if err = l.SetWeight(o.weight); err == nil {
				err = l.Add(os.Getpid())
			}
			defer func() { _ = l.Leave(os.Getpid()); _ = l.Remove() }()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchscaling:", err)
			return 1
		}
	}
	var rows []row
sweep:
	for round := 1; round <= o.rounds; round++ {
		for ni, n := range o.nodes {
			for _, k := range roundOrder(o.leaders, round) {
				// Every configuration keeps its ports over the rounds (its
				// previous cluster has stopped), so the run needs 300 ports
				// per configuration and stays below the ephemeral range
				// (32768 and up on Linux), where an outgoing connection
				// can hold a port a later row wants to listen on.
				port := o.port + 300*(ni*len(o.leaders)+slices.Index(o.leaders, k))
				fmt.Fprintf(os.Stderr, "benchscaling: round %d of %d, %d nodes, %d leaders\n", round, o.rounds, n, k)
				r, err := measure(ctx, o, n, k, port)
				if err != nil {
					fmt.Fprintf(os.Stderr, "benchscaling: %d nodes, %d leaders: %v\n", n, k, err)
					o.stoppedEarlyErr = fmt.Errorf("round %d, %d nodes, %d leaders: %w", round, n, k, err)
					break sweep
				}
				r.round = round
				fmt.Fprintf(os.Stderr, "benchscaling:   %.0f ops/s, %.1f ops/entry, node CPU %s\n", r.opsPerSec, r.opsPerEntry, r.nodeCPU(o.cpu))
				if l := passLine(r); l != "" {
					fmt.Fprintf(os.Stderr, "benchscaling:   %s\n", l)
				}
				rows = append(rows, r)
			}
		}
	}
	if len(rows) > 0 {
		if err := write(o, rows); err != nil {
			fmt.Fprintln(os.Stderr, "benchscaling:", err)
			return 1
		}
		fmt.Println("wrote", o.out)
	}
	if o.stoppedEarlyErr != nil {
		return 1
	}
	return 0
}

// row is one configuration's figures.
type row struct {
	round          int // 1-based, with --rounds
	nodes, leaders int
	leadersOn      []int // shard leaders per node (index: node-1)
	replicasOn     []int // data shard replicas per node
	clients        int
	idleRSS, rss   []float64 // resident memory per node before and after the load, MB
	moved          int       // shards whose leader changed during the measurement
	opsPerSec      float64
	perLeader      []float64   // ops/s each leader put into Raft entries
	perfPerOp      []perfCount // --perf-events over the measured time, per operation
	opsPerEntry    float64
	p50, p99, mean float64   // acquire latency, ms
	cores          []float64 // CPU used per node, cores
	throttled      []float64 // fraction of enforcement periods in which the node hit its quota
	clientCores    float64
	otherCores     float64 // machine CPU used by neither the nodes nor the load generator
	walPerOp       float64
	readsPerOp     float64             // read syscalls of every node per operation
	writesPerOp    float64             // write syscalls (fsync is not counted)
	switchesPerOp  float64             // context switches of every node's threads per operation (wake-ups)
	passes         raftnode.PassCounts // Raft pass counters over the row, every node
	ops            uint64              // operations put into entries over the same window
	errors         int64
	load           float64 // 1-minute load average at the end of the row
}

func (r row) serverCPUPerOp() float64 {
	var sum float64
	for _, c := range r.cores {
		sum += c
	}
	return sum / r.opsPerSec * 1e6
}

func (r row) nodeCPU(quota float64) string {
	var parts []string
	for i, c := range r.cores {
		s := fmt.Sprintf("%.2f", c)
		if r.leadersOn[i] > 0 {
			s += fmt.Sprintf(" [%d]", r.leadersOn[i])
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// measure runs one configuration on a fresh cluster.
func measure(ctx context.Context, o options, nodes, leaders, port int) (row, error) {
	r := row{nodes: nodes, leaders: leaders, clients: o.clients}
	if o.perLeader > 0 {
		r.clients = o.perLeader * leaders
	}
	g, eps, err := harness.StartWarden(ctx, harness.WardenOptions{Binary: o.bin, Nodes: nodes, Shards: leaders,
		Replicas: 3, BasePort: port, Args: o.args, CPUCores: o.cpu, CPUPeriod: o.period, CPUWeight: o.weight, Verb: verb(o)})
	if err != nil {
		return r, err
	}
	defer g.Stop()
	mk := func() *loadtest.Warden { return loadtest.NewWarden(loadtest.WardenOptions{Endpoints: eps}) }
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	d := mk()
	err = loadtest.Probe(pctx, d, "/probe/ready/lock")
	d.Close()
	cancel()
	if err != nil {
		return r, err
	}
	// One client per node, without direct routing, for each node's own status.
	per := make([]*client.Client, nodes)
	for i, ep := range eps {
		if per[i], err = client.New(ctx, []string{ep}, client.WithoutDirectRouting()); err != nil {
			return r, err
		}
		defer per[i].Close()
	}
	want, replicas, err := spreadLeaders(ctx, per[0], nodes)
	if err != nil {
		return r, err
	}
	r.leadersOn, r.replicasOn = make([]int, nodes), make([]int, nodes)
	for _, n := range want {
		r.leadersOn[n-1]++
	}
	for _, n := range replicas {
		r.replicasOn[n-1]++
	}
	for _, pid := range g.PIDs() {
		rss, _ := loadtest.ProcRSS(pid)
		r.idleRSS = append(r.idleRSS, float64(rss)/(1<<20))
	}
	b, err := sample(ctx, g, per)
	if err != nil {
		return r, err
	}
	d = mk()
	prof := profile(ctx, o, nodes, leaders, port)
	counts := perfStat(ctx, o, g.PIDs())
	res, err := loadtest.Run(ctx, d, loadtest.Config{Scenario: "uncontended", Clients: r.clients,
		Duration: o.duration, Warmup: o.warmup, PIDs: g.PIDs()})
	d.Close()
	if perr := prof(); perr != nil {
		fmt.Fprintln(os.Stderr, "benchscaling: profile:", perr)
	}
	if err != nil {
		return r, err
	}
	a, err := sample(ctx, g, per)
	if err != nil {
		return r, err
	}
	r.opsPerSec = res.Metrics["lock_ops_per_s"]
	if r.opsPerSec <= 0 {
		return r, fmt.Errorf("no lock operation succeeded (errors %v)", res.Errors)
	}
	pc, secs, perr := counts()
	if perr != nil {
		fmt.Fprintln(os.Stderr, "benchscaling: perf stat:", perr)
	}
	for _, c := range pc {
		r.perfPerOp = append(r.perfPerOp, perfCount{c.event, c.n / (r.opsPerSec * secs)})
	}
	acq := res.Ops["acquire"]
	r.p50, r.p99, r.mean = acq.P50Ms, acq.P99Ms, acq.MeanMs
	for _, n := range res.Errors {
		r.errors += n
	}
	r.load = res.Metrics["loadavg_1m"]
	r.clientCores = res.Metrics["loadgen_cpu_cores"]
	var nodesCores float64
	for i, pid := range g.PIDs() {
		c := res.Metrics[fmt.Sprintf("cpu_cores_pid_%d", pid)]
		r.cores = append(r.cores, c)
		rss, _ := loadtest.ProcRSS(pid)
		r.rss = append(r.rss, float64(rss)/(1<<20))
		nodesCores += c
		if g.CPU != nil {
			p := a.cpu[i].Periods - b.cpu[i].Periods
			t := a.cpu[i].Throttled - b.cpu[i].Throttled
			r.throttled = append(r.throttled, float64(t)/float64(max(p, 1)))
		}
	}
	wall := a.at.Sub(b.at).Seconds()
	r.otherCores = max(0, float64(a.busy-b.busy)/100/wall-nodesCores-r.clientCores)
	// Operations each shard's replicas put into Raft entries; the leader's
	// share of the whole gives its rate (the window of these counters is a
	// little wider than the load generator's measured one).
	var ops, entries uint64
	var perShard []uint64
	for id, x := range a.ops {
		dOps := x - b.ops[id]
		ops += dOps
		entries += a.entries[id] - b.entries[id]
		perShard = append(perShard, dOps)
		if a.leader[id] != b.leader[id] {
			r.moved++
		}
	}
	if entries > 0 {
		r.opsPerEntry = float64(ops) / float64(entries)
	}
	if ops > 0 {
		slices.Sort(perShard)
		for _, s := range perShard {
			r.perLeader = append(r.perLeader, r.opsPerSec*float64(s)/float64(ops))
		}
		r.walPerOp = float64(a.wal-b.wal) / float64(ops)
		r.readsPerOp = float64(a.syscr-b.syscr) / float64(ops)
		r.writesPerOp = float64(a.syscw-b.syscw) / float64(ops)
		r.switchesPerOp = float64(a.switches-b.switches) / float64(ops)
	}
	r.passes, r.ops = addPasses(a.passes, b.passes, -1), ops
	return r, nil
}

func verb(o options) string {
	if o.profileDir == "" {
		return ""
	}
	return "bench node"
}

// profile starts fetching every node's CPU profile over the measured time
// (after the warm-up) when --profile-dir is set; the function it returns
// waits for them.
func profile(ctx context.Context, o options, nodes, leaders, port int) func() error {
	if o.profileDir == "" {
		return func() error { return nil }
	}
	if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
		return func() error { return err }
	}
	errs := make(chan error, nodes)
	for i := 0; i < nodes; i++ {
		go func() {
			errs <- func() error {
				select {
				case <-time.After(o.warmup):
				case <-ctx.Done():
					return ctx.Err()
				}
				secs := max(1, int((o.duration-time.Second)/time.Second))
				url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", port+200+i, secs)
				resp, err := http.Get(url)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				f, err := os.Create(filepath.Join(o.profileDir, fmt.Sprintf("%dn-%dl-node%d.pprof", nodes, leaders, i+1)))
				if err != nil {
					return err
				}
				if _, err = io.Copy(f, resp.Body); err != nil {
					f.Close()
					return err
				}
				return f.Close()
			}()
		}()
	}
	return func() error {
		var first error
		for i := 0; i < nodes; i++ {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
}

// snapshot is the counters read before and after a row's load.
type snapshot struct {
	at           time.Time
	busy         int64 // machine CPU ticks not idle (/proc/stat)
	cpu          []harness.CPUStat
	ops, entries map[uint64]uint64 // per data shard, summed over its replicas
	leader       map[uint64]uint64
	wal          int64               // bytes in every node's Raft directory
	syscr, syscw int64               // read and write syscalls of every node (/proc/<pid>/io)
	switches     int64               // context switches of every node's threads
	passes       raftnode.PassCounts // every node's Raft pass counters, summed
}

// nodeStatus is the part of a node's status document (OpStatus) read here.
type nodeStatus struct {
	Node   uint64               `json:"node"`
	Passes *raftnode.PassCounts `json:"passes"`
	Shards []struct {
		ID          uint64 `json:"id"`
		IsLeader    bool   `json:"is_leader"`
		Proposals   uint64 `json:"proposals"`
		ProposedOps uint64 `json:"proposed_ops"`
	} `json:"shards"`
}

func sample(ctx context.Context, g *harness.Group, per []*client.Client) (snapshot, error) {
	s := snapshot{at: time.Now(), busy: machineBusy(), ops: map[uint64]uint64{}, entries: map[uint64]uint64{}, leader: map[uint64]uint64{}}
	for _, pid := range g.PIDs() {
		r, w := procIO(pid)
		s.syscr, s.syscw = s.syscr+r, s.syscw+w
		s.switches += contextSwitches(pid)
	}
	for _, l := range g.CPU {
		st, err := l.Stat()
		if err != nil {
			return s, err
		}
		s.cpu = append(s.cpu, st)
	}
	for _, c := range per {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		raw, err := c.Status(cctx)
		cancel()
		if err != nil {
			return s, err
		}
		var st nodeStatus
		if err := json.Unmarshal(raw, &st); err != nil {
			return s, err
		}
		if p := st.Passes; p != nil {
			s.passes = addPasses(s.passes, *p, 1)
		}
		for _, sh := range st.Shards {
			s.ops[sh.ID] += sh.ProposedOps
			s.entries[sh.ID] += sh.Proposals
			if sh.IsLeader {
				s.leader[sh.ID] = st.Node
			}
		}
	}
	filepath.WalkDir(g.Dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(path, string(filepath.Separator)+"raft"+string(filepath.Separator)) {
			if info, err := d.Info(); err == nil {
				s.wal += info.Size()
			}
		}
		return nil
	})
	return s, nil
}

// spreadLeaders plans every data shard's leader on the node of its
// replicas that leads the fewest so far (round-robin when every node holds
// every shard), transfers leaderships until the plan holds, and returns
// the plan and the node of every data shard replica.
func spreadLeaders(ctx context.Context, c *client.Client, nodes int) (map[uint64]uint64, []uint64, error) {
	shards, err := c.Shards(ctx)
	if err != nil {
		return nil, nil, err
	}
	var replicas []uint64
	for _, s := range shards {
		for _, rep := range s.Replicas {
			replicas = append(replicas, rep.Node)
		}
	}
	slices.SortFunc(shards, func(a, b client.ShardView) int { return int(a.ID) - int(b.ID) })
	want := map[uint64]uint64{}
	count := make([]int, nodes+1)
	for i, s := range shards {
		rr := uint64(i%nodes) + 1
		var best uint64
		for _, rep := range s.Replicas {
			if rep.Role != "leader" && rep.Role != "voter" {
				continue
			}
			if best == 0 || count[rep.Node] < count[best] || (count[rep.Node] == count[best] && rep.Node == rr) {
				best = rep.Node
			}
		}
		if best == 0 {
			return nil, nil, fmt.Errorf("shard %d has no voter", s.ID)
		}
		want[s.ID] = best
		count[best]++
	}
	deadline := time.Now().Add(60 * time.Second)
	asked := map[uint64]time.Time{}
	for {
		shards, err := c.Shards(ctx)
		if err != nil {
			return nil, nil, err
		}
		bad := 0
		for _, s := range shards {
			if s.Leader == want[s.ID] {
				continue
			}
			bad++
			if s.Leader != 0 && time.Since(asked[s.ID]) > 2*time.Second {
				asked[s.ID] = time.Now()
				if err := c.TransferLeader(ctx, s.ID, want[s.ID]); err != nil {
					fmt.Fprintf(os.Stderr, "benchscaling: transfer shard %d to node %d: %v\n", s.ID, want[s.ID], err)
				}
			}
		}
		if bad == 0 {
			return want, replicas, nil
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("%d shards not led where planned after 60 s", bad)
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// procIO reads a process's read and write syscall counts.
func procIO(pid int) (r, w int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "syscr":
			r = n
		case "syscw":
			w = n
		}
	}
	return r, w
}

// contextSwitches sums the voluntary and involuntary context switches of a
// process's threads: how often its threads went to sleep or were put off the
// CPU, i.e. its wake-ups. Go keeps its threads, so the sum only grows (a
// thread that exits takes its count with it).
func contextSwitches(pid int) int64 {
	dirs, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var sum int64
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			if k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches" {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				sum += n
			}
		}
	}
	return sum
}

// machineBusy is the machine's non-idle CPU time in clock ticks (USER_HZ).
func machineBusy() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		// user nice system idle iowait irq softirq steal guest guest_nice;
		// guest time is already in user.
		if i == 3 || i == 4 || i >= 8 {
			continue
		}
		busy += n
	}
	return busy
}

func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	var l float64
	fmt.Sscan(string(b), &l)
	return l
}

func ints(s string) []int {
	var out []int
	for _, p := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(p)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

func write(o options, rows []row) error {
	var f strings.Builder
	if _, err := os.Stat(o.out); !o.appendOut || err != nil {
		fmt.Fprintf(&f, `# Scaling: the same load over more shard leaders, one CPU budget per node

Produced by `+"`make bench-scaling`"+` (loadtest/cmd/benchscaling). Every node is
its own `+"`warden serve`"+` process in its own CPU-limited cgroup, so each node
stands for a small machine with a fixed CPU budget; the quotas together stay
below the machine's cores, and a high CPU weight (`+"`--weight`"+`) lets the nodes
use their quota before other work on the machine. The load generator is a separate process outside
every quota: closed-loop workers, one operation in flight each (acquire, then
release, on namespaces spread over every range). 3 replicas per shard; shard
leaders are spread over the nodes by leader transfer and stay there
(`+"`--no-leader-balance`"+`). See docs/scaling.md for the method and the cost model.

Columns: **node CPU** is each node's CPU use in cores, with [k] after a node
that leads k data shards; **quota hit** is the share of enforcement periods in
which the node used up its quota and was stopped until the next period (near
100%% = the node is saturated); **ops/s per leader** is each leader's share of
the operations put into Raft entries; **server CPU/op** sums every node;
**other CPU** is what the rest of the machine used meanwhile (other jobs: the
quotas cannot give the nodes CPU the machine does not have).
`)
	}
	mode := "the server's default batching (2048 operations per entry, 32 entries in flight)"
	if o.batch > 0 {
		mode = fmt.Sprintf("latency-bound leaders (`--batch %d`: at most %d operations per entry, one entry in flight)", o.batch, o.batch)
	}
	if len(o.nodeArgs) > 0 {
		mode += ", node flags `" + strings.Join(o.nodeArgs, " ") + "` on top"
	}
	quota := "no CPU quotas (every node shares the machine)"
	if o.cpu > 0 {
		quota = fmt.Sprintf("%.2f cores per node (period %v)", o.cpu, o.period)
	}
	fmt.Fprintf(&f, "\n## Run %s: %s, %s\n\n", o.startedAt.Format(time.RFC3339), quota, mode)
	workers := fmt.Sprintf("%d workers (the same load in every row)", o.clients)
	if o.perLeader > 0 {
		workers = fmt.Sprintf("%d workers per shard leader (the load grows with the leaders)", o.perLeader)
	}
	fmt.Fprintf(&f, "%s, %v measured after %v of warm-up per row, %d CPUs, load average %.2f before the run. %s Command: `go run ./loadtest/cmd/benchscaling %s`.\n\n",
		workers, o.duration, o.warmup, runtime.NumCPU(), o.loadBefore, o.disk, strings.Join(os.Args[1:], " "))
	if o.stoppedEarlyErr != nil {
		fmt.Fprintf(&f, "**The run stopped early**: %v.\n\n", o.stoppedEarlyErr)
	}
	roundCol := func(r row) string { return "" }
	if o.rounds > 1 {
		roundCol = func(r row) string { return fmt.Sprintf("| %d ", r.round) }
		f.WriteString("| round ")
	}
	fmt.Fprintln(&f, "| nodes | shard leaders | ops/s | ops/s per leader (min–max) | ops per entry | acquire ms p50 / p99 | node CPU, cores [leaders] | quota hit % | server CPU µs/op | client CPU cores | other CPU cores | WAL B/op | node syscalls/op, read + write | node context switches/op | node RSS MB, idle → loaded | workers | errors | load avg |")
	if o.rounds > 1 {
		f.WriteString("|---")
	}
	fmt.Fprintln(&f, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		var hit []string
		for _, t := range r.throttled {
			hit = append(hit, fmt.Sprintf("%.0f", 100*t))
		}
		pl := "–"
		if len(r.perLeader) > 0 {
			pl = fmt.Sprintf("%.0f–%.0f", r.perLeader[0], r.perLeader[len(r.perLeader)-1])
		}
		errs := fmt.Sprint(r.errors)
		if r.moved > 0 {
			errs += fmt.Sprintf(" (%d leaders moved)", r.moved)
		}
		var rss []string
		for i, m := range r.rss {
			rss = append(rss, fmt.Sprintf("%.0f→%.0f", r.idleRSS[i], m))
		}
		f.WriteString(roundCol(r))
		fmt.Fprintf(&f, "| %d | %d | %.0f | %s | %.1f | %.1f / %.1f | %s | %s | %.0f | %.2f | %.2f | %.0f | %.2f + %.2f | %.2f | %s | %d | %s | %.1f |\n",
			r.nodes, r.leaders, r.opsPerSec, pl, r.opsPerEntry, r.p50, r.p99, r.nodeCPU(o.cpu), strings.Join(hit, ", "),
			r.serverCPUPerOp(), r.clientCores, r.otherCores, r.walPerOp, r.readsPerOp, r.writesPerOp, r.switchesPerOp, strings.Join(rss, ", "), r.clients, errs, r.load)
	}
	for _, r := range rows {
		if len(r.perfPerOp) == 0 {
			continue
		}
		var cs []string
		for _, c := range r.perfPerOp {
			cs = append(cs, fmt.Sprintf("%s %.3f", c.event, c.n))
		}
		fmt.Fprintf(&f, "\nperf events per operation, %d nodes, %d leaders (every node, measured time): %s\n", r.nodes, r.leaders, strings.Join(cs, ", "))
	}
	for _, r := range rows {
		if l := passLine(r); l != "" {
			fmt.Fprintf(&f, "\n%s\n", l)
		}
	}
	var medians []medianRow
	if o.rounds > 1 {
		medians = medianRows(rows)
		f.WriteString(mediansTable(medians))
	}
	f.WriteString(summary(rows, medians))
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if o.appendOut {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	fh, err := os.OpenFile(o.out, flags, 0o644)
	if err != nil {
		return err
	}
	if _, err := fh.WriteString(f.String()); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// summary states the ratios the rows show, without judging them. With
// several rounds the throughput ratios are read off each row's median
// (medians), the fits off every row.
func summary(rows []row, medians []medianRow) string {
	var b strings.Builder
	b.WriteString("\n")
	if medians != nil {
		b.WriteString(growthLines(medians))
	} else {
		b.WriteString(ratioLines(rows))
	}
	rest(&b, rows)
	return b.String()
}

// ratioLines compares, per node count, the first row with the fastest one
// and the last rows of the smallest and largest node counts.
func ratioLines(rows []row) string {
	var b strings.Builder
	first := map[int]row{}
	best := map[int]row{}
	for _, r := range rows {
		if _, ok := first[r.nodes]; !ok {
			first[r.nodes] = r
		}
		if r.opsPerSec > best[r.nodes].opsPerSec {
			best[r.nodes] = r
		}
	}
	var ns []int
	for n := range first {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	for _, n := range ns {
		f, m := first[n], best[n]
		fmt.Fprintf(&b, "- %d nodes: %d leader(s) %.0f ops/s; the most, %.0f ops/s, at %d leaders (%.2f×).\n",
			n, f.leaders, f.opsPerSec, m.opsPerSec, m.leaders, m.opsPerSec/f.opsPerSec)
	}
	last := map[int]row{}
	for _, r := range rows {
		last[r.nodes] = r
	}
	if len(ns) >= 2 {
		a, z := last[ns[0]], last[ns[len(ns)-1]]
		if a.leaders == z.leaders {
			fmt.Fprintf(&b, "- At %d leaders, %d nodes reach %.2f× the throughput of %d nodes.\n", a.leaders, z.nodes, z.opsPerSec/a.opsPerSec, a.nodes)
		}
	}
	return b.String()
}

// rest fits the per-operation cost and the memory over every row.
func rest(b *strings.Builder, rows []row) {
	// Server CPU per operation against operations per entry: a fixed cost
	// per operation plus one per Raft entry shared by the entry's operations.
	var xs, ys []float64
	for _, r := range rows {
		if r.opsPerEntry > 0 {
			xs, ys = append(xs, 1/r.opsPerEntry), append(ys, r.serverCPUPerOp())
		}
	}
	if a, k, r2, ok := fit(xs, ys); ok {
		fmt.Fprintf(b, "- Server CPU per operation, all replicas, fitted over the rows: %.0f µs + %.0f µs per Raft entry ÷ operations per entry (R² %.2f).\n", a, k, r2)
	}
	// Entries each leader makes per second: when it hardly depends on the
	// leader's load, a load spread over more leaders makes smaller entries.
	lo, hi, llo, lhi := -1.0, 0.0, -1.0, 0.0
	for _, r := range rows {
		if r.opsPerEntry > 0 {
			l := r.opsPerSec / float64(r.leaders)
			e := l / r.opsPerEntry
			if lo < 0 || e < lo {
				lo = e
			}
			if llo < 0 || l < llo {
				llo = l
			}
			hi, lhi = max(hi, e), max(lhi, l)
		}
	}
	if lo > 0 {
		fmt.Fprintf(b, "- Raft entries per second per leader: %.0f–%.0f over the rows, while the load per leader ranged %.0f–%.0f ops/s.\n", lo, hi, llo, lhi)
	}
	// Resident memory of a node against the data shard replicas it holds,
	// idle (before the load: what a replica costs at rest) and after it
	// (buffers and heap the load grew).
	for _, when := range []string{"before", "after"} {
		xs, ys = nil, nil
		for _, r := range rows {
			for i, m := range r.rss {
				if when == "before" {
					m = r.idleRSS[i]
				}
				xs, ys = append(xs, float64(r.replicasOn[i])), append(ys, m)
			}
		}
		if a, k, r2, ok := fit(xs, ys); ok {
			fmt.Fprintf(b, "- Node resident memory %s the load, fitted over every node: %.0f MB + %.1f MB per data shard replica (R² %.2f).\n", when, a, k, r2)
		}
	}
}

// fit is the least-squares line y = a + k·x and its R².
func fit(xs, ys []float64) (a, k, r2 float64, ok bool) {
	n := float64(len(xs))
	if n < 3 {
		return 0, 0, 0, false
	}
	var sx, sy, sxx, sxy, syy float64
	for i := range xs {
		sx, sy = sx+xs[i], sy+ys[i]
		sxx, sxy, syy = sxx+xs[i]*xs[i], sxy+xs[i]*ys[i], syy+ys[i]*ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0, 0, 0, false
	}
	k = (n*sxy - sx*sy) / d
	a = (sy - k*sx) / n
	vy := n*syy - sy*sy
	if vy > 0 {
		r2 = (n*sxy - sx*sy) * (n*sxy - sx*sy) / (d * vy)
	}
	return a, k, r2, true
}
