// Command benchload measures Warden alone on this machine: a 3-process
// cluster per data-shard count, uncontended throughput against clients and
// shards, contended hand-offs, latency at one client and at half of peak
// (open loop), sessions CPU, watch fan-out, elections, held-lock memory, and
// CPU profiles of the nodes. `make bench-load` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wardenlock/warden/loadtest"
	"github.com/wardenlock/warden/loadtest/harness"
)

func main() {
	var (
		bin      = flag.String("warden", "bin/warden", "warden binary")
		out      = flag.String("out", "build/bench", "output directory (git-ignored)")
		shardsF  = flag.String("shards", "1,2,4,8,16", "data shard counts to sweep")
		refShard = flag.Int("ref-shards", 8, "shard count for the full scenario set")
		sweepC   = flag.String("clients", "1,16,64,256", "client counts for the uncontended sweep (at ref-shards)")
		dur      = flag.Duration("duration", 5*time.Second, "measured time per run")
		repeat   = flag.Int("repeat", 3, "runs per step (the median is reported)")
		maxTime  = flag.Duration("max-time", 40*time.Minute, "hard bound on the whole benchmark")
		sessions = flag.String("sessions", "10000,100000", "session counts")
		locks    = flag.Int("locks", 1000000, "held locks")
		profile  = flag.Bool("profile", true, "save CPU profiles of the nodes under uncontended load")
		only     = flag.String("only", "", "comma-separated step labels prefixes to run (empty: all)")
		name     = flag.String("name", "load", "output file name (name.md, name.json, name.html)")
		selfProf = flag.String("loadgen-profile", "", "write a CPU profile of the load generator itself (the whole run) to this file")
	)
	flag.BoolVar(&contention, "contention", false, "with --profile: also save blocking and mutex profiles of the nodes (they cost some CPU)")
	flag.BoolVar(&allocs, "allocs", false, "with --profile: also save the nodes' allocations over the same 15 s (-allocs.pprof)")
	flag.StringVar(&nodeArgs, "node-args", "", "more flags for every warden node, space-separated (e.g. --no-audit)")
	flag.StringVar(&nodeEnv, "node-env", "", "more environment for every warden node, space-separated (e.g. GODEBUG=gctrace=1)")
	flag.IntVar(&basePort, "port", 27000, "first port of the first cluster (clients; Raft at +100, pprof at +200)")
	flag.Float64Var(&openRate, "open-rate", 0, "open-loop step rate in cycles/s (0: half of the best closed-loop rate; < 0: no open-loop step); with --only open, only that step runs")
	flag.DurationVar(&traceFor, "trace", 0, "during the first open-loop run, save Go execution traces this long of every node and of the load generator (in OUT/traces)")
	flag.BoolVar(&keepLogs, "keep-logs", false, "copy the node logs to OUT/logs before the cluster is removed")
	flag.DurationVar(&slowOver, "slow-over", 0, "open-loop step: list every operation slower than this in the JSON (\"slow\", times in ms after \"measured\")")
	flag.BoolVar(&scrape, "metrics", false, "start every node's admin API (port +250) and save its /metrics before and after the open-loop step (in OUT/metrics)")
	flag.Parse()
	if *selfProf != "" {
		f, err := os.Create(*selfProf)
		must(err)
		must(pprof.StartCPUProfile(f))
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *maxTime)
	defer cancel()
	rep := &loadtest.Report{Title: "Warden load benchmark", Machine: loadtest.ThisMachine(),
		Command: "go run ./loadtest/cmd/benchload " + strings.Join(os.Args[1:], " ")}
	rep.Machine.ProbeDisk(os.TempDir(), 2*time.Second) // the harness's data dirs are there
	var all []loadtest.Outcome
	shardCounts := ints(*shardsF)
	// The reference shard count runs first: it carries most figures.
	order := []int{*refShard}
	for _, s := range shardCounts {
		if s != *refShard {
			order = append(order, s)
		}
	}
	for i, s := range order {
		outs, err := cluster(ctx, *bin, s, basePort+300*i, s == *refShard, stepsFor(s, s == *refShard, *sweepC, *dur, *sessions, *locks, *only), *repeat, *profile && s == *refShard, *out)
		all = append(all, outs...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchload:", err)
			break
		}
	}
	for _, o := range all {
		rep.Results = append(rep.Results, o.Runs...)
	}
	must(os.MkdirAll(*out, 0o755))
	writeFile(filepath.Join(*out, *name+".json"), func(w io.Writer) error {
		return loadtest.WriteJSON(w, struct {
			Machine  loadtest.Machine   `json:"machine"`
			Outcomes []loadtest.Outcome `json:"outcomes"`
		}{rep.Machine, all})
	})
	writeFile(filepath.Join(*out, *name+".html"), func(w io.Writer) error { return loadtest.WriteHTML(w, rep) })
	writeFile(filepath.Join(*out, *name+".md"), func(w io.Writer) error { return markdown(w, rep.Machine, all) })
	fmt.Println("wrote", filepath.Join(*out, *name+".{md,json,html}"))
}

func stepsFor(shards int, ref bool, sweep string, dur time.Duration, sessions string, locks int, only string) []loadtest.Step {
	base := loadtest.Config{Duration: dur, Warmup: 2 * time.Second}
	mk := func(label, sc string, clients int, edit func(*loadtest.Config)) loadtest.Step {
		c := base
		c.Scenario, c.Clients = sc, clients
		if edit != nil {
			edit(&c)
		}
		return loadtest.Step{Label: fmt.Sprintf("shards=%d %s", shards, label), Cfg: c}
	}
	var steps []loadtest.Step
	if !ref {
		steps = append(steps, mk("uncontended c=256", "uncontended", 256, nil))
	} else {
		for _, c := range ints(sweep) {
			steps = append(steps, mk(fmt.Sprintf("uncontended c=%d", c), "uncontended", c, nil))
		}
		steps = append(steps,
			mk("contended c=32 hot=1", "contended", 32, func(c *loadtest.Config) { c.HotLocks = 1 }),
			mk("hierarchical c=64", "hierarchical", 64, nil),
			mk("elections c=16", "elections", 16, nil),
			mk("watch w=1000", "watch", 16, func(c *loadtest.Config) { c.Watchers = 1000; c.Duration = max(dur, 10*time.Second) }),
		)
		for _, n := range ints(sessions) {
			steps = append(steps, mk(fmt.Sprintf("sessions n=%d", n), "sessions", 1, func(c *loadtest.Config) {
				c.Sessions, c.SessionTTL, c.Duration = n, 10*time.Second, 15*time.Second
			}))
		}
		steps = append(steps, mk(fmt.Sprintf("held n=%d", locks), "held", 128, func(c *loadtest.Config) {
			c.Locks, c.Duration, c.Warmup = locks, 120*time.Second, 0
		}))
	}
	return loadtest.SelectSteps(steps, only, fmt.Sprintf("shards=%d ", shards))
}

// cluster starts a fresh cluster with the given shard count, runs steps on
// it (plus the open-loop half-of-peak step and profiles at the reference
// count), and stops it.
func cluster(ctx context.Context, bin string, shards, port int, ref bool, steps []loadtest.Step, repeat int, profile bool, out string) ([]loadtest.Outcome, error) {
	args := strings.Fields(nodeArgs)
	if contention && profile {
		args = append(args, "--contention")
	}
	var perNode func(i int) []string
	if scrape {
		perNode = func(i int) []string { return []string{"--admin", fmt.Sprintf("127.0.0.1:%d", port+250+i)} }
	}
	g, eps, err := harness.StartWarden(ctx, harness.WardenOptions{Binary: bin, Shards: shards, BasePort: port, Verb: "bench node", Args: args, NodeArgs: perNode, Env: strings.Fields(nodeEnv)})
	if err != nil {
		return nil, err
	}
	defer g.Stop()
	if keepLogs {
		defer saveLogs(g, filepath.Join(out, "logs"), shards)
	}
	mk := func() loadtest.Driver { return loadtest.NewWarden(loadtest.WardenOptions{Endpoints: eps}) }
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = loadtest.Probe(pctx, mk(), "/probe/ready/lock")
	cancel()
	if err != nil {
		return nil, err
	}
	// Several steps hold sessions or locks; the held step is the last.
	// Sessions and held locks are slow to set up: they run once.
	var many, once []loadtest.Step
	for _, st := range steps {
		if st.Cfg.Scenario == "sessions" || st.Cfg.Scenario == "held" {
			once = append(once, st)
		} else {
			many = append(many, st)
		}
	}
	outs, err := loadtest.RunSteps(ctx, "warden", mk, many, repeat, g.PIDs(), os.Stderr)
	if err != nil || !ref {
		return outs, err
	}
	// Half of peak, open loop: the rate is half the best closed-loop cycle rate.
	var peak float64
	for _, o := range outs {
		if o.Median != nil && o.Median.Scenario == "uncontended" && o.Median.Rate == 0 {
			peak = max(peak, o.Median.Metrics["cycles_per_s"])
		}
	}
	rate, what := peak/2, "half of peak"
	if openRate > 0 {
		rate, what = openRate, "--open-rate"
	} else if openRate < 0 {
		rate = 0 // no open-loop step
	}
	if rate > 0 {
		half := loadtest.Step{Label: fmt.Sprintf("shards=%d open-loop rate=%.0f cycles/s (%s)", shards, rate, what),
			Cfg: loadtest.Config{Scenario: "uncontended", Clients: 1024, Rate: rate, Duration: 10 * time.Second, Warmup: 2 * time.Second, SlowOver: slowOver}}
		if traceFor > 0 {
			// Traces of the first run start as its measured time begins.
			var once sync.Once
			half.Cfg.OnMeasure = func() {
				once.Do(func() { traces(ctx, port, shards, traceFor, filepath.Join(out, "traces")) })
			}
		}
		saveMetrics(ctx, port, shards, "before", filepath.Join(out, "metrics"))
		more, err := loadtest.RunSteps(ctx, "warden", mk, []loadtest.Step{half}, repeat, g.PIDs(), os.Stderr)
		saveMetrics(ctx, port, shards, "after", filepath.Join(out, "metrics"))
		outs = append(outs, more...)
		if err != nil {
			return outs, err
		}
	}
	if profile {
		profiles(ctx, mk, port, shards, out)
	}
	more, err := loadtest.RunSteps(ctx, "warden", mk, once, 1, g.PIDs(), os.Stderr)
	return append(outs, more...), err
}

// Options from the command line.
var (
	contention bool
	allocs     bool
	nodeArgs   string
	nodeEnv    string
	basePort   int
	openRate   float64
	traceFor   time.Duration
	keepLogs   bool
	scrape     bool
	slowOver   time.Duration
)

// saveMetrics saves every node's /metrics (with --metrics), so the
// server-side latency histograms of one step are the difference of two
// scrapes.
func saveMetrics(ctx context.Context, port, shards int, when, dir string) {
	if !scrape {
		return
	}
	must(os.MkdirAll(dir, 0o755))
	for i := 0; i < 3; i++ {
		url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port+250+i)
		if err := fetch(ctx, url, filepath.Join(dir, fmt.Sprintf("open-shards%d-node%d-%s.prom", shards, i+1, when))); err != nil {
			fmt.Fprintln(os.Stderr, "benchload: metrics:", err)
		}
	}
}

// traces records a Go execution trace of every node (through its
// /debug/pprof/trace) and of this process for d, so a stall can be
// attributed on both sides of the connection.
func traces(ctx context.Context, port, shards int, d time.Duration, dir string) {
	must(os.MkdirAll(dir, 0o755))
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() {
			url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/trace?seconds=%d", port+200+i, int(d.Seconds()))
			errs <- fetch(ctx, url, filepath.Join(dir, fmt.Sprintf("open-shards%d-node%d.trace", shards, i+1)))
		}()
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("open-shards%d-loadgen.trace", shards)))
	must(err)
	if err := trace.Start(f); err == nil {
		time.Sleep(d)
		trace.Stop()
	}
	must(f.Close())
	for i := 0; i < 3; i++ {
		if err := <-errs; err != nil {
			fmt.Fprintln(os.Stderr, "benchload: trace:", err)
		}
	}
	fmt.Fprintln(os.Stderr, "benchload: traces in", dir)
}

// saveLogs copies the node logs (GODEBUG output included) out of the
// cluster's temp dir.
func saveLogs(g *harness.Group, dir string, shards int) {
	must(os.MkdirAll(dir, 0o755))
	for i, p := range g.Procs {
		b, err := os.ReadFile(p.Log)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("shards%d-node%d.log", shards, i+1)), b, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchload: logs:", err)
		}
	}
}

// profiles runs uncontended load at 256 clients and saves a 15 s CPU profile
// of every node (and, with --contention, its blocking and mutex profiles
// over the same 15 s).
func profiles(ctx context.Context, mk func() loadtest.Driver, port, shards int, out string) {
	dir := filepath.Join(out, "profiles")
	must(os.MkdirAll(dir, 0o755))
	done := make(chan struct{})
	go func() {
		defer close(done)
		d := mk()
		defer d.Close()
		r, err := loadtest.Run(ctx, d, loadtest.Config{Scenario: "uncontended", Clients: 256, Duration: 20 * time.Second, Warmup: time.Second})
		if err == nil {
			// The profiles span 15 of these 20 s: per-operation costs are
			// samples ÷ (this rate × 15 s).
			v, unit := loadtest.Headline(r)
			fmt.Fprintf(os.Stderr, "benchload: profile run, %d shards: %.0f %s\n", shards, v, unit)
		}
	}()
	time.Sleep(3 * time.Second)
	kinds := map[string]string{"profile": ""}
	if contention {
		kinds["block"], kinds["mutex"] = "-block", "-mutex"
	}
	if allocs {
		kinds["allocs"] = "-allocs"
	}
	errs := make(chan error, 3*len(kinds))
	for i := 0; i < 3; i++ {
		for kind, suffix := range kinds {
			go func() {
				url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/%s?seconds=15", port+200+i, kind)
				path := filepath.Join(dir, fmt.Sprintf("uncontended-c256-shards%d-node%d%s.pprof", shards, i+1, suffix))
				errs <- fetch(ctx, url, path)
			}()
		}
	}
	for i := 0; i < 3*len(kinds); i++ {
		if err := <-errs; err != nil {
			fmt.Fprintln(os.Stderr, "benchload: profile:", err)
		}
	}
	<-done
}

func fetch(ctx context.Context, url, path string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func markdown(w io.Writer, m loadtest.Machine, outs []loadtest.Outcome) error {
	fmt.Fprintf(w, "# Warden load benchmark\n\n%d CPUs (%s), %.1f GiB, Linux %s, %s, %s. Warden: 3 replicas in 3 `warden` processes on 127.0.0.1, load generator on the same machine. Each row is the median of its runs (all runs listed). %s\n\n",
		m.NProc, m.CPU, m.MemGiB, m.Kernel, m.Go, m.Date, m.DiskLine())
	fmt.Fprintln(w, "| step | headline (median) | all runs | acquire p50 / p99 / p99.9 ms | cycles/s | server cores | loadgen CPU µs/lock op | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, o := range outs {
		r := o.Median
		if r == nil {
			continue
		}
		v, unit := loadtest.Headline(r)
		var runs []string
		for _, x := range o.Values {
			runs = append(runs, strconv.FormatFloat(x, 'f', 1, 64))
		}
		acq := r.Ops["acquire"]
		if r.Scenario == "watch" {
			acq = r.Ops["delivery"]
		}
		if r.Scenario == "elections" {
			acq = r.Ops["campaign"]
		}
		var errs int64
		for _, n := range r.Errors {
			errs += n
		}
		perOp := "–"
		if us, ok := r.Metrics["loadgen_cpu_us_per_lock_op"]; ok {
			perOp = strconv.FormatFloat(us, 'f', 2, 64)
		}
		fmt.Fprintf(w, "| %s | %.1f %s | %s | %.2f / %.2f / %.2f | %.0f | %.2f | %s | %d |\n", o.Label, v, unit, strings.Join(runs, ", "),
			acq.P50Ms, acq.P99Ms, acq.P999Ms, r.Metrics["cycles_per_s"], r.Metrics["server_cpu_cores"], perOp, errs)
	}
	return nil
}

func ints(s string) []int {
	var out []int
	for _, p := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(p)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func writeFile(path string, f func(io.Writer) error) {
	fh, err := os.Create(path)
	must(err)
	must(f(fh))
	must(fh.Close())
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchload:", err)
		os.Exit(1)
	}
}
