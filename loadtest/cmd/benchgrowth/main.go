// Command benchgrowth measures a cluster that grows under a load larger
// than it can serve, with the automatic shard policy choosing the shard
// count (no --shards).
//
// Each node is its own `warden serve` process in its own CPU-limited
// cgroup (--cpu cores per --cpu-period), standing for a small machine, as
// in benchscaling. First a reference cluster (3 nodes, one shard: the best
// fixed layout for 3 nodes) takes the same load, settle and measured run
// alike. The growth cluster
// starts on 3 nodes with the policy's initial layout and the nodes' default
// thresholds (a node saturates by its CPU, whatever rate that is), and
// nodes join one at a time up to --max-nodes (`warden serve --join`). At
// every step the closed-loop load (--clients workers, acquire then release
// on namespaces spread over every range) runs for --settle while the
// policy reacts, then for --duration measured: the report gives
// throughput, active shards, leaders and CPU per node and the policy's
// decisions per step. With --rounds N the whole sequence runs N times on
// fresh clusters and the report gives the median of each step, with every
// round's figure beside it. `make bench-growth` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/loadtest"
	"github.com/wardenlock/warden/loadtest/harness"
)

type options struct {
	bin       string
	out       string
	cpu       float64
	period    time.Duration
	weight    float64
	clients   int
	maxNodes  int
	settle    time.Duration
	settleMax time.Duration
	duration  time.Duration
	port      int
	maxTime   time.Duration
	sustain   time.Duration
	cooldown  time.Duration
	saturated float64
	rounds    int
}

// round is one run of the whole sequence: the reference, then the steps.
type round struct {
	reference float64
	steps     []step
}

type step struct {
	nodes     int
	opsPerSec float64
	p99       float64
	errors    int64
	shards    int
	leaders   []int // per node
	replicas  []int // per node, of active shards
	decisions []string
	verdict   string
	settled   time.Duration             // load before the measured run
	peakMiB   []int                     // per node: the most resident memory it used so far
	cpu       map[string]client.NodeCPU // node id → the policy's last reading
}

func main() {
	var o options
	flag.StringVar(&o.bin, "warden", "bin/warden", "warden binary")
	flag.StringVar(&o.out, "out", "build/bench/growth.md", "markdown report to write")
	flag.Float64Var(&o.cpu, "cpu", 0.2, "CPU quota of every node, in cores (0: no cgroups)")
	flag.DurationVar(&o.period, "cpu-period", 10*time.Millisecond, "CFS period the quota is enforced over")
	flag.Float64Var(&o.weight, "weight", 10, "with --cpu: CPU weight of every node's cgroup, in ordinary processes")
	flag.IntVar(&o.clients, "clients", 1024, "closed-loop workers (the load must exceed what the cluster serves)")
	flag.IntVar(&o.maxNodes, "max-nodes", 5, "nodes at the last step (3 at the first)")
	flag.DurationVar(&o.settle, "settle", 60*time.Second, "least load before each measured run, while the policy reacts")
	flag.DurationVar(&o.settleMax, "settle-max", 5*time.Minute, "most load before each measured run: the load goes on past --settle while the policy still changes the layout")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per step")
	flag.IntVar(&o.port, "port", 33000, "first port (clients; Raft at +100)")
	flag.DurationVar(&o.maxTime, "max-time", 40*time.Minute, "hard bound on the whole benchmark")
	flag.DurationVar(&o.sustain, "sustain", 10*time.Second, "the nodes' --shard-sustain")
	flag.DurationVar(&o.cooldown, "cooldown", 15*time.Second, "the nodes' --shard-cooldown")
	flag.IntVar(&o.rounds, "rounds", 2, "runs of the whole sequence on fresh clusters (the report gives medians)")
	flag.Float64Var(&o.saturated, "saturated-ops", 0, "the nodes' --shard-saturated-ops (0: their default; they saturate by CPU first)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.maxTime)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "benchgrowth:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	started := time.Now()
	var rounds []round
	for i := 1; i <= max(1, o.rounds); i++ {
		fmt.Fprintf(os.Stderr, "round %d of %d\n", i, max(1, o.rounds))
		r, err := runRound(ctx, o)
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		rounds = append(rounds, r)
		settleDisk()
	}
	return write(o, rounds, started)
}

// runRound measures the reference, then grows a cluster step by step.
func runRound(ctx context.Context, o options) (round, error) {
	peak, err := reference(ctx, o)
	if err != nil {
		return round{}, fmt.Errorf("reference: %w", err)
	}
	settleDisk()
	fmt.Fprintf(os.Stderr, "one shard on 3 nodes: %.0f lock ops/s\n", peak)
	policy := []string{"--shard-policy", "--shard-sustain", o.sustain.String(),
		"--shard-cooldown", o.cooldown.String(), "--shard-idle-for", "1h", "--shard-max", "16"}
	if o.saturated > 0 {
		policy = append(policy, "--shard-saturated-ops", fmt.Sprint(o.saturated))
	}
	g, eps, err := harness.StartWarden(ctx, harness.WardenOptions{Binary: o.bin, Nodes: 3, BasePort: o.port,
		Args: policy, CPUCores: o.cpu, CPUPeriod: o.period, CPUWeight: o.weight})
	if err != nil {
		return round{}, err
	}
	defer g.Stop()
	if err := probe(ctx, eps); err != nil {
		return round{}, err
	}
	admin, err := client.New(ctx, eps, client.WithRequestTimeout(10*time.Second))
	if err != nil {
		return round{}, err
	}
	defer admin.Close()
	var steps []step
	seen := 0
	for n := 3; n <= o.maxNodes; n++ {
		if n > 3 {
			if err := join(ctx, o, g, eps, n, policy); err != nil {
				return round{}, fmt.Errorf("node %d joins: %w", n, err)
			}
			eps = harness.Ports(o.port, n)
		}
		fmt.Fprintf(os.Stderr, "%d nodes: load while the policy reacts\n", n)
		took, err := react(ctx, o, eps, admin)
		if err != nil {
			return round{}, err
		}
		res, err := load(ctx, eps, o.clients, o.duration)
		if err != nil {
			return round{}, err
		}
		s := step{nodes: n, opsPerSec: res.Metrics["lock_ops_per_s"], p99: res.Ops["acquire"].P99Ms, leaders: make([]int, n), replicas: make([]int, n),
			settled: took}
		for _, e := range res.Errors {
			s.errors += e
		}
		shards, err := admin.Shards(ctx)
		if err != nil {
			return round{}, err
		}
		for _, sh := range shards {
			if sh.State != "active" {
				continue
			}
			s.shards++
			if sh.Leader >= 1 && int(sh.Leader) <= n {
				s.leaders[sh.Leader-1]++
			}
			for _, r := range sh.Replicas {
				if r.Node >= 1 && int(r.Node) <= n {
					s.replicas[r.Node-1]++
				}
			}
		}
		if log, err := admin.ShardLog(ctx); err == nil {
			for _, d := range log.Decisions[min(seen, len(log.Decisions)):] {
				s.decisions = append(s.decisions, fmt.Sprintf("%s %d (%s)", d.Action, d.Shard, d.Reason))
			}
			seen = len(log.Decisions)
			if log.Policy != nil {
				s.verdict, s.cpu = log.Policy.Verdict, log.Policy.NodeCPU
			}
		}
		for _, pid := range g.PIDs() {
			peak, _ := loadtest.ProcPeakRSS(pid) // 0 when unknown
			s.peakMiB = append(s.peakMiB, int(peak>>20))
		}
		fmt.Fprintf(os.Stderr, "%d nodes: %.0f lock ops/s, %d shards, leaders %v, peak RSS MiB %v\n", n, s.opsPerSec, s.shards, s.leaders, s.peakMiB)
		steps = append(steps, s)
	}
	return round{reference: peak, steps: steps}, nil
}

// react runs the load for --settle, and on while the policy is still
// changing the layout (its verdict says it waits for a change, cools down
// after one, makes one or counts a saturation towards one) or the shards'
// leaders changed within leadersSettle, for at most --settle-max in all:
// one run of the load, so that its sessions are opened once. It returns
// how long the load ran.
func react(ctx context.Context, o options, eps []string, admin *client.Client) (time.Duration, error) {
	start := time.Now()
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	loadErr := make(chan error, 1)
	go func() {
		_, err := load(lctx, eps, o.clients, o.settleMax)
		loadErr <- err
	}()
	leaders, changed := "", time.Now()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-loadErr:
			return time.Since(start), err
		case <-tick.C:
		}
		verdict := ""
		if log, err := admin.ShardLog(ctx); err == nil && log.Policy != nil {
			verdict = log.Policy.Verdict
		}
		if l := leaderMap(ctx, admin); l != leaders {
			leaders, changed = l, time.Now()
		}
		if took := time.Since(start); took >= o.settle && !changing(verdict) && time.Since(changed) >= leadersSettle {
			stop()
			<-loadErr // cut short on purpose: its error says only that
			return took, nil
		}
	}
}

// leadersSettle is how long the shards' leaders must stay put before the
// measured run: the balancer moves a leadership only once none changed for
// 5 s and that one is 10 s old, one round every 2 s.
const leadersSettle = 20 * time.Second

// leaderMap says which node leads each active shard ("" when unknown).
func leaderMap(ctx context.Context, admin *client.Client) string {
	shards, err := admin.Shards(ctx)
	if err != nil {
		return ""
	}
	var parts []string
	for _, sh := range shards {
		if sh.State == "active" {
			parts = append(parts, fmt.Sprintf("%d:%d", sh.ID, sh.Leader))
		}
	}
	return strings.Join(parts, " ")
}

// changing says whether a policy verdict (as decideShards in
// control/policy.go words it) is one of a layout still moving.
func changing(verdict string) bool {
	for _, p := range []string{"waiting", "cooling down", "adding a shard", "retiring"} {
		if strings.HasPrefix(verdict, p) {
			return true
		}
	}
	return strings.HasPrefix(verdict, "node ") && strings.Contains(verdict, " saturated for ")
}

// settleDisk writes back what a stopped cluster left dirty, so that the
// next cluster's syncs do not queue behind it.
func settleDisk() {
	syscall.Sync()
	time.Sleep(5 * time.Second)
}

// reference measures the load on 3 nodes with one shard, after the same
// settle time as each step (the stores fill and compact alike).
func reference(ctx context.Context, o options) (float64, error) {
	g, eps, err := harness.StartWarden(ctx, harness.WardenOptions{Binary: o.bin, Nodes: 3, Shards: 1, BasePort: o.port + 500,
		CPUCores: o.cpu, CPUPeriod: o.period, CPUWeight: o.weight})
	if err != nil {
		return 0, err
	}
	defer g.Stop()
	if err := probe(ctx, eps); err != nil {
		return 0, err
	}
	if _, err := load(ctx, eps, o.clients, o.settle); err != nil {
		return 0, err
	}
	res, err := load(ctx, eps, o.clients, o.duration)
	if err != nil {
		return 0, err
	}
	return res.Metrics["lock_ops_per_s"], nil
}

func probe(ctx context.Context, eps []string) error {
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	d := loadtest.NewWarden(loadtest.WardenOptions{Endpoints: eps})
	defer d.Close()
	return loadtest.Probe(pctx, d, "/probe/ready/lock")
}

func load(ctx context.Context, eps []string, clients int, d time.Duration) (*loadtest.Result, error) {
	w := loadtest.NewWarden(loadtest.WardenOptions{Endpoints: eps})
	defer w.Close()
	return loadtest.Run(ctx, w, loadtest.Config{Scenario: "uncontended", Clients: clients, Duration: d, Warmup: time.Second})
}

// join starts node n with --join in its own cgroup and waits until the
// cluster lists it.
func join(ctx context.Context, o options, g *harness.Group, eps []string, n int, policy []string) error {
	addr, raft := harness.Ports(o.port, n)[n-1], harness.Ports(o.port+100, n)[n-1]
	argv := append([]string{o.bin, "serve", "--id", fmt.Sprint(n), "--data-dir", filepath.Join(g.Dir, fmt.Sprintf("node%d", n)),
		"--listen", addr, "--raft", raft, "--join", strings.Join(eps, ","), "--plaintext"}, policy...)
	var limit *harness.CPULimit
	if o.cpu > 0 {
		var err error
		if limit, err = harness.NewCPULimit(fmt.Sprintf("node%d", n), o.cpu, o.period); err != nil {
			return err
		}
		g.CPU = append(g.CPU, limit)
		if o.weight > 0 {
			if err := limit.SetWeight(o.weight); err != nil {
				return err
			}
		}
	}
	p, err := harness.Start(ctx, fmt.Sprintf("warden%d", n), filepath.Join(g.Dir, fmt.Sprintf("node%d.log", n)), nil, argv...)
	if err != nil {
		return err
	}
	g.Procs = append(g.Procs, p)
	if limit != nil {
		if err := limit.Add(p.PID()); err != nil {
			return err
		}
	}
	cl, err := client.New(ctx, eps, client.WithRequestTimeout(5*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("node %d exited: %s", n, p.Tail())
		}
		raw, err := cl.Status(ctx)
		if err == nil && strings.Count(string(raw), `"raft_addr"`) >= n {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("node %d not registered after 90s", n)
}

func write(o options, rounds []round, started time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Growth under the shard policy\n\n")
	fmt.Fprintf(&b, "`benchgrowth %s` (`make bench-growth`), %s\n\n", strings.Join(os.Args[1:], " "), version(o.bin))
	fmt.Fprintf(&b, "%s; every node in a cgroup of %.2f cores (period %v); %d closed-loop clients (uncontended lock/unlock); "+
		"%v of load before each %v measured run, longer (up to %v) while the policy still changes the layout; %d round(s) on fresh clusters; started %s, %.0f min.\n\n",
		machine(), o.cpu, o.period, o.clients, o.settle, o.duration, o.settleMax, len(rounds),
		started.UTC().Format(time.RFC3339), time.Since(started).Minutes())
	thresholds := "their default thresholds"
	if o.saturated > 0 {
		thresholds = fmt.Sprintf("--shard-saturated-ops %.0f", o.saturated)
	}
	var refs []float64
	for _, r := range rounds {
		refs = append(refs, r.reference)
	}
	peak := median(refs)
	fmt.Fprintf(&b, "Reference: one shard on 3 nodes (the best fixed layout there) served %.0f lock ops/s (median; rounds %s). "+
		"The growth cluster's nodes run the policy with %s.\n\n", peak, figures(refs), thresholds)
	b.WriteString("| nodes | lock ops/s (median) | every round | vs previous |\n|---|---|---|---|\n")
	var prev float64
	for i := range rounds[0].steps {
		var v []float64
		for _, r := range rounds {
			if i < len(r.steps) {
				v = append(v, r.steps[i].opsPerSec)
			}
		}
		m := median(v)
		vs := "-"
		switch {
		case i > 0 && prev > 0:
			vs = fmt.Sprintf("%.2f×", m/prev)
		case i == 0 && peak > 0:
			vs = fmt.Sprintf("%.2f× the reference", m/peak)
		}
		fmt.Fprintf(&b, "| %d | %.0f | %s | %s |\n", rounds[0].steps[i].nodes, m, figures(v), vs)
		prev = m
	}
	for ri, r := range rounds {
		fmt.Fprintf(&b, "\nRound %d (reference %.0f):\n\n", ri+1, r.reference)
		b.WriteString("| nodes | lock ops/s | active shards | leaders per node | replicas per node | CPU per node (share of its quota) | acquire p99 ms | errors | load before | peak RSS per node, MiB |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range r.steps {
			fmt.Fprintf(&b, "| %d | %.0f | %d | %v | %v | %s | %.1f | %d | %v | %v |\n", s.nodes, s.opsPerSec, s.shards, s.leaders, s.replicas,
				cpuShares(s.cpu, s.nodes), s.p99, s.errors, s.settled.Round(time.Second), s.peakMiB)
		}
	}
	steps := rounds[len(rounds)-1].steps
	b.WriteString("\nDecisions per step (the last round):\n\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "- %d nodes: ", s.nodes)
		if len(s.decisions) == 0 {
			b.WriteString("none")
		}
		b.WriteString(strings.Join(s.decisions, "; "))
		if s.verdict != "" {
			fmt.Fprintf(&b, " — policy: %s", s.verdict)
		}
		b.WriteString("\n")
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	fmt.Print(b.String())
	return os.WriteFile(o.out, []byte(b.String()), 0o644)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// figures lists values as whole numbers.
func figures(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, ", ")
}

// cpuShares lists each node's CPU as a share of its quota, in node order.
func cpuShares(cpu map[string]client.NodeCPU, nodes int) string {
	if len(cpu) == 0 {
		return "-"
	}
	var parts []string
	for n := 1; n <= nodes; n++ {
		r, ok := cpu[fmt.Sprint(n)]
		if !ok || r.Capacity <= 0 {
			parts = append(parts, "?")
			continue
		}
		parts = append(parts, fmt.Sprintf("%.0f%%", 100*r.Used/r.Capacity))
	}
	return strings.Join(parts, " ")
}

// version is what the binary says of its build.
func version(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "version unknown: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}

func machine() string {
	m := loadtest.ThisMachine()
	return fmt.Sprintf("%d CPUs (%s), %.1f GiB, Linux %s, %s", m.NProc, m.CPU, m.MemGiB, m.Kernel, m.Go)
}
