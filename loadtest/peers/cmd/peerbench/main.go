// Command peerbench runs the same scenarios against Warden (3 replicas in 3
// processes), a 3-member etcd, a 3-server ZooKeeper and one Redis, one after
// another on this machine, and writes one comparison table. `make
// bench-peers` installs the peers from Debian and runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wardenlock/warden/loadtest"
	"github.com/wardenlock/warden/loadtest/harness"
	"github.com/wardenlock/warden/loadtest/peers"
)

func main() {
	loadtest.RoundReplicaMain() // the floor probe starts this binary as its replicas
	var (
		bin     = flag.String("warden", "bin/warden", "warden binary")
		systems = flag.String("systems", "warden,etcd,zookeeper,redis", "systems to run, in order")
		out     = flag.String("out", "build/bench", "output directory (git-ignored)")
		dur     = flag.Duration("duration", 5*time.Second, "measured time per run")
		repeat  = flag.Int("repeat", 3, "runs per step (the median is reported)")
		shardsF = flag.String("shards", "1,8", "Warden data shard counts: Warden runs once per count (a column each, \"warden-N\", when there are several)")
		maxTime = flag.Duration("max-time", 30*time.Minute, "hard bound on the whole run")
		watch   = flag.Int("watchers", 1000, "watch fan-out: watchers")
		only    = flag.String("only", "", "comma-separated step label prefixes to run, e.g. contended (empty: all)")
		name    = flag.String("name", "peers", "output file name stem: <out>/<name>.{md,json,html}")
		from    = flag.String("from", "", "run nothing: write the report and the charts of a saved <name>.json (--shards, --duration and --repeat describe that run)")
	)
	flag.Parse()
	if *from != "" {
		shards, err := shardCounts(*shardsF)
		must(err)
		must(fromJSON(*from, *out, *name, *dur, *repeat, shards))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *maxTime)
	defer cancel()

	steps := loadtest.SelectSteps(plan(*dur, *watch), *only, "")
	if len(steps) == 0 {
		must(fmt.Errorf("--only %q matches no step", *only))
	}
	m := loadtest.ThisMachine()
	m.Versions["etcd"] = loadtest.CommandVersion("etcd", "--version")
	m.Versions["redis"] = loadtest.CommandVersion("redis-server", "--version")
	m.Versions["zookeeper"] = dpkgVersion("zookeeper")
	m.Versions["java"] = loadtest.CommandVersion("java", "-version")
	m.Versions["warden"] = gitRev()
	peers.SetZooKeeperVersion(m.Versions["zookeeper"])
	m.ProbeDisk(os.TempDir(), 2*time.Second) // every system's data dir is there
	m.ProbeFloor(ctx, os.TempDir(), 4*time.Second)
	var all []loadtest.Outcome
	var problems []string
	shards, err := shardCounts(*shardsF)
	must(err)
	for i, sys := range expand(strings.Split(*systems, ","), shards) {
		outs, err := runSystem(ctx, sys, *bin, 30000+500*i, steps, *repeat)
		all = append(all, outs...)
		if err != nil {
			msg := fmt.Sprintf("%s: %v", sys.name, err)
			fmt.Fprintln(os.Stderr, "peerbench:", msg)
			problems = append(problems, msg)
		}
		if ctx.Err() != nil {
			break
		}
	}
	rep := &loadtest.Report{Title: "Warden and its peers", Machine: m, Command: "go run ./cmd/peerbench " + strings.Join(os.Args[1:], " ")}
	for _, o := range all {
		rep.Results = append(rep.Results, o.Runs...)
	}
	must(os.MkdirAll(*out, 0o755))
	writeFile(filepath.Join(*out, *name+".json"), func(w io.Writer) error {
		return loadtest.WriteJSON(w, saved{m, problems, all})
	})
	writeFile(filepath.Join(*out, *name+".html"), func(w io.Writer) error { return loadtest.WriteHTML(w, rep) })
	writeFile(filepath.Join(*out, *name+".md"), func(w io.Writer) error { return markdown(w, m, all, problems, *dur, *repeat, shards) })
	writeCharts(*out, all)
	fmt.Println("wrote", filepath.Join(*out, *name+".{md,json,html}"), "and the charts", filepath.Join(*out, "{peers,latency}.svg"))
}

// saved is the JSON a run writes: the machine, any problems, every outcome.
type saved struct {
	Machine  loadtest.Machine   `json:"machine"`
	Problems []string           `json:"problems,omitempty"`
	Outcomes []loadtest.Outcome `json:"outcomes"`
}

// fromJSON writes the markdown report and the charts of a saved run.
func fromJSON(path, out, name string, dur time.Duration, repeat int, shards []int) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var s saved
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	writeFile(filepath.Join(out, name+".md"), func(w io.Writer) error {
		return markdown(w, s.Machine, s.Outcomes, s.Problems, dur, repeat, shards)
	})
	writeCharts(out, s.Outcomes)
	fmt.Println("wrote", filepath.Join(out, name+".md"), "and the charts", filepath.Join(out, "{peers,latency}.svg"))
	return nil
}

// writeCharts writes peers.svg (throughput) and latency.svg (the acquire
// latency distribution) into out.
func writeCharts(out string, outs []loadtest.Outcome) {
	writeFile(filepath.Join(out, "peers.svg"), func(w io.Writer) error { return peersChart(w, outs) })
	writeFile(filepath.Join(out, "latency.svg"), func(w io.Writer) error { return latencyChart(w, outs) })
}

func plan(dur time.Duration, watchers int) []loadtest.Step {
	base := loadtest.Config{Duration: dur, Warmup: 2 * time.Second}
	mk := func(label, sc string, clients int, edit func(*loadtest.Config)) loadtest.Step {
		c := base
		c.Scenario, c.Clients = sc, clients
		if edit != nil {
			edit(&c)
		}
		return loadtest.Step{Label: label, Cfg: c}
	}
	return []loadtest.Step{
		mk("uncontended c=1", "uncontended", 1, nil),
		mk("uncontended c=64", "uncontended", 64, nil),
		mk("uncontended c=256", "uncontended", 256, nil),
		mk("uncontended c=1024", "uncontended", 1024, nil),
		mk("contended c=32, 1 hot lock", "contended", 32, nil),
		mk("elections c=16", "elections", 16, nil),
		mk(fmt.Sprintf("watch fan-out, %d watchers", watchers), "watch", 16, func(c *loadtest.Config) { c.Watchers = watchers }),
	}
}

// system is one column of the report: a peer, or Warden at one shard count.
type system struct {
	name   string // the column: "warden", "warden-8", "etcd", ...
	kind   string // "warden", "etcd", "zookeeper" or "redis"
	shards int    // Warden's data shards
}

// shardCounts parses --shards.
func shardCounts(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--shards %q: want shard counts of 1 or more, comma-separated", list)
		}
		out = append(out, n)
	}
	return out, nil
}

// expand gives Warden one column per shard count (named warden-N when there
// are several), in --shards order, where --systems names it.
func expand(names []string, shards []int) []system {
	var out []system
	for _, n := range names {
		if n != "warden" {
			out = append(out, system{name: n, kind: n})
			continue
		}
		for _, s := range shards {
			name := "warden"
			if len(shards) > 1 {
				name = fmt.Sprintf("warden-%d", s)
			}
			out = append(out, system{name: name, kind: n, shards: s})
		}
	}
	return out
}

func runSystem(ctx context.Context, sys system, bin string, port int, steps []loadtest.Step, repeat int) ([]loadtest.Outcome, error) {
	var (
		g   *harness.Group
		mk  func() loadtest.Driver
		err error
	)
	switch sys.kind {
	case "warden":
		var eps []string
		g, eps, err = harness.StartWarden(ctx, harness.WardenOptions{Binary: bin, Shards: sys.shards, BasePort: port})
		mk = func() loadtest.Driver { return loadtest.NewWarden(loadtest.WardenOptions{Endpoints: eps}) }
	case "etcd":
		var eps []string
		g, eps, err = peers.StartEtcd(ctx, port)
		mk = func() loadtest.Driver { return &peers.Etcd{Endpoints: eps, Conns: 4, TTL: 30} }
	case "zookeeper":
		var eps []string
		g, eps, err = peers.StartZooKeeper(ctx, port)
		mk = func() loadtest.Driver { return &peers.ZooKeeper{Servers: eps, Conns: 4, TTL: 10 * time.Second} }
	case "redis":
		var addr string
		g, addr, err = peers.StartRedis(ctx, port)
		mk = func() loadtest.Driver { return &peers.Redis{Addr: addr, TTL: 30 * time.Second, Conns: 256} }
	default:
		return nil, fmt.Errorf("unknown system %q", sys.name)
	}
	if err != nil {
		return nil, err
	}
	defer g.Stop()
	pctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	err = loadtest.Probe(pctx, mk(), "/probe/ready/lock")
	cancel()
	if err != nil {
		return nil, err
	}
	outs, err := loadtest.RunSteps(ctx, sys.name, mk, steps, repeat, g.PIDs(), os.Stderr)
	// The HTML report names a run by its driver: Warden's columns
	// (warden-1, warden-8) must stay apart there too.
	for _, o := range outs {
		for _, r := range o.Runs {
			r.Driver = sys.name
		}
	}
	return outs, err
}

func markdown(w io.Writer, m loadtest.Machine, outs []loadtest.Outcome, problems []string, dur time.Duration, repeat int, shards []int) error {
	fmt.Fprintf(w, "# Warden and its peers on one machine\n\n")
	fmt.Fprintf(w, "Machine: %d CPUs (%s), %.1f GiB RAM, Linux %s, %s, %s. %s %s\n\n", m.NProc, m.CPU, m.MemGiB, m.Kernel, m.Go, m.Date, m.DiskLine(), m.FloorLine())
	for _, k := range []string{"warden", "etcd", "zookeeper", "redis", "java"} {
		fmt.Fprintf(w, "- %s: %s\n", k, m.Versions[k])
	}
	fmt.Fprintf(w, "\nAll on 127.0.0.1, load generator on the same machine, systems run one after another. Warden: 3 replicas in 3 `warden serve` processes, %s. etcd: 3 members (concurrency.Mutex / Election, one session per worker). ZooKeeper: 3 servers (go-zookeeper lock recipe). Redis: one server, SET NX PX + compare-and-delete Lua release, retry every 1–4 ms when taken; no replication and no fsync (Redis defaults minus RDB snapshots), so it is not a like-for-like durability comparison. Each cell is the median of %d runs of %s after a 2 s warm-up; every run is listed in peers.json. A lock op is one acquire or one release; a cycle is both.\n\n", shardWords(shards), repeat, dur)
	systems := []string{}
	seen := map[string]bool{}
	cell := map[[2]string]loadtest.Outcome{}
	var labels []string
	seenL := map[string]bool{}
	for _, o := range outs {
		if !seen[o.System] {
			seen[o.System] = true
			systems = append(systems, o.System)
		}
		if !seenL[o.Label] {
			seenL[o.Label] = true
			labels = append(labels, o.Label)
		}
		cell[[2]string{o.System, o.Label}] = o
	}
	fmt.Fprintf(w, "| step | figure | %s |\n|---|---|%s\n", strings.Join(systems, " | "), strings.Repeat("---|", len(systems)))
	for _, l := range labels {
		var unit string
		var vals []string
		for _, s := range systems {
			o, ok := cell[[2]string{s, l}]
			if !ok || o.Median == nil {
				vals = append(vals, "–")
				continue
			}
			if o.Median.Unsupported != "" {
				vals = append(vals, "n/a")
				continue
			}
			v, u := loadtest.Headline(o.Median)
			unit = u
			vals = append(vals, strconv.FormatFloat(v, 'f', 1, 64))
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", l, unit, strings.Join(vals, " | "))
	}
	fmt.Fprintf(w, "\nLatency of the judged operation (median run: p50 / p99 / p99.9 ms; acquire for locks, campaign for elections, delivery for watches):\n\n")
	fmt.Fprintf(w, "| step | %s |\n|---|%s\n", strings.Join(systems, " | "), strings.Repeat("---|", len(systems)))
	for _, l := range labels {
		var vals []string
		for _, s := range systems {
			o, ok := cell[[2]string{s, l}]
			if !ok || o.Median == nil || o.Median.Unsupported != "" {
				vals = append(vals, "–")
				continue
			}
			op := map[string]string{"elections": "campaign", "watch": "delivery"}[o.Median.Scenario]
			if op == "" {
				op = "acquire"
			}
			st := o.Median.Ops[op]
			errs := ""
			if n := sumErrors(o.Median); n > 0 {
				errs = fmt.Sprintf(" (%d errors)", n)
			}
			vals = append(vals, fmt.Sprintf("%.2f / %.2f / %.2f%s", st.P50Ms, st.P99Ms, st.P999Ms, errs))
		}
		fmt.Fprintf(w, "| %s | %s |\n", l, strings.Join(vals, " | "))
	}
	ratio := func(label, a, b string) string {
		x, y := cell[[2]string{a, label}], cell[[2]string{b, label}]
		if x.Median == nil || y.Median == nil {
			return "–"
		}
		va, _ := loadtest.Headline(x.Median)
		vb, _ := loadtest.Headline(y.Median)
		if vb == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", va/vb)
	}
	var wardens []string
	for _, s := range systems {
		if strings.HasPrefix(s, "warden") {
			wardens = append(wardens, s)
		}
	}
	targets := []struct{ target, label, peer string }{
		{"uncontended ≥ 25× etcd's lock cycles (256 clients)", "uncontended c=256", "etcd"},
		{"uncontended > Redis SET NX cycles (256 clients)", "uncontended c=256", "redis"},
		{"uncontended ≥ 25× etcd's lock cycles (1,024 clients)", "uncontended c=1024", "etcd"},
		{"uncontended > Redis SET NX cycles (1,024 clients)", "uncontended c=1024", "redis"},
		{"contended ≥ 10× etcd's hand-offs", "contended c=32, 1 hot lock", "etcd"},
		{"contended ≥ 3× ZooKeeper's hand-offs", "contended c=32, 1 hot lock", "zookeeper"},
	}
	fmt.Fprintf(w, "\nTargets (Warden against its peers; docs/performance.md says where each stands):\n\n| target | %s |\n|---|%s\n", strings.Join(wardens, " | "), strings.Repeat("---|", len(wardens)))
	for _, g := range targets {
		var vals []string
		for _, wd := range wardens {
			vals = append(vals, ratio(g.label, wd, g.peer))
		}
		fmt.Fprintf(w, "| %s | %s |\n", g.target, strings.Join(vals, " | "))
	}
	floorTable(w, m.Floor, systems, cell)
	if len(problems) > 0 {
		fmt.Fprintf(w, "\nProblems during the run:\n\n")
		for _, p := range problems {
			fmt.Fprintf(w, "- %s\n", p)
		}
	}
	return nil
}

// floorTable says how far each system is from the machine's floor: the
// bare replicated durable round (Machine.ProbeFloor) that any replicated
// lock service pays per commit before any work of its own.
func floorTable(w io.Writer, floor *loadtest.RoundFacts, systems []string, cell map[[2]string]loadtest.Outcome) {
	if floor == nil {
		return
	}
	rows := [][2]string{
		{"uncontended c=1", "one-client acquire p50 ÷ the floor's round p50"},
		{"contended c=32, 1 hot lock", "contended hand-off time ÷ the floor's mean round"},
	}
	var lines []string
	for _, row := range rows {
		var vals []string
		some := false
		for _, s := range systems {
			if v := floor.FloorMultiple(cell[[2]string{s, row[0]}].Median); v > 0 {
				vals, some = append(vals, fmt.Sprintf("%.1f×", v)), true
			} else {
				vals = append(vals, "–")
			}
		}
		if some {
			lines = append(lines, fmt.Sprintf("| %s | %s |", row[1], strings.Join(vals, " | ")))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\nDistance from the machine's floor (1.0× would be a system that does nothing but replicate and sync; Redis neither replicates nor syncs here, so it can go below):\n\n")
	fmt.Fprintf(w, "| measure | %s |\n|---|%s\n%s\n", strings.Join(systems, " | "), strings.Repeat("---|", len(systems)), strings.Join(lines, "\n"))
}

// shardWords names Warden's shard counts for the report's setup sentence.
func shardWords(shards []int) string {
	if len(shards) == 1 {
		return fmt.Sprintf("%d data shards", shards[0])
	}
	var parts []string
	for _, s := range shards {
		parts = append(parts, fmt.Sprintf("%d data shards (column warden-%d)", s, s))
	}
	return "run once per shard count: " + strings.Join(parts, ", ")
}

func sumErrors(r *loadtest.Result) int64 {
	var n int64
	for _, v := range r.Errors {
		n += v
	}
	return n
}

func dpkgVersion(pkg string) string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", pkg).Output()
	if err != nil {
		return "not installed"
	}
	return strings.TrimSpace(string(out))
}

func gitRev() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

func writeFile(path string, f func(io.Writer) error) {
	fh, err := os.Create(path)
	must(err)
	must(f(fh))
	must(fh.Close())
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
}
