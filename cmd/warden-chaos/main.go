// Command warden-chaos runs Warden's multi-process fault suite (package
// chaos) and writes its figures to a results file; `warden-chaos client`
// is the lock-set client process the suite pauses with SIGSTOP.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wardenlock/warden/chaos"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "run":
		os.Exit(run(os.Args[2:]))
	case "client":
		os.Exit(clientMode(os.Args[2:]))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  warden-chaos run [--schedule short|full|holds|shards|snapshots] [--window d] [--only substring] [--seed N] [--bugs list] [--trials N] [--out file]
  warden-chaos client --endpoints a,b,c --oracle URL --path P --name N [--ttl 2s] [--hold 300ms]`)
	os.Exit(2)
}

func run(args []string) int {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	schedule := fs.String("schedule", "short", "short, full, holds (the failed-acquire workload under kills and pauses, for --window), shards (data shards created and retired under faults), or snapshots (faults while every replica snapshots and compacts its log every 64 KiB)")
	window := fs.Duration("window", 10*time.Minute, "fault window of the holds schedule")
	only := fs.String("only", "", "run only scenarios whose name contains this")
	seed := fs.Int64("seed", time.Now().UnixNano()%1_000_000, "seed")
	bugs := fs.String("bugs", os.Getenv("WARDEN_TEST_BUGS"), "test-only bug switches for the nodes")
	trials := fs.Int("trials", 20, "trials per figure (0: no figures)")
	out := fs.String("out", "build/bench/faults.txt", "results file (git-ignored)")
	reports := fs.String("reports", filepath.Join(os.TempDir(), "warden-chaos-reports"), "report folders of failed runs")
	bin := fs.String("warden", "", "warden binary (default: build ./cmd/warden)")
	fs.Parse(args)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	binary := *bin
	if binary == "" {
		dir, err := os.MkdirTemp("", "warden-chaos-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		wd, _ := os.Getwd()
		if binary, err = chaos.BuildBinary(wd, dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	self, _ := os.Executable()
	env := chaos.Env{Binary: binary, ReportDir: *reports, Seed: *seed, Out: os.Stderr, ClientCmd: []string{self}}
	if *bugs != "" {
		env.Bugs = strings.Split(*bugs, ",")
	}
	scenarios := chaos.ShortSchedule()
	switch *schedule {
	case "full":
		scenarios = chaos.FullSchedule()
	case "holds":
		scenarios = chaos.HoldsSchedule(*window)
	case "shards":
		scenarios = chaos.ShardsSchedule()
	case "snapshots":
		scenarios = chaos.SnapshotsSchedule()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# warden-chaos %s schedule, seed %d, %s\n", *schedule, *seed, time.Now().UTC().Format(time.RFC3339))
	failed := 0
	start := time.Now()
	for _, sc := range scenarios {
		if *only != "" && !strings.Contains(sc.Name, *only) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		r := chaos.Run(ctx, sc, env)
		fmt.Fprint(os.Stderr, r.Summary())
		status := "PASS"
		if r.Failed() {
			status, failed = "FAIL", failed+1
		}
		fmt.Fprintf(&b, "%s %-28s %5.0fs", status, sc.Name, time.Since(t0).Seconds())
		for _, n := range r.Notes {
			if strings.HasPrefix(n, "register: linearizable") || strings.HasPrefix(n, "fenced set:") || strings.HasPrefix(n, "leases:") ||
				strings.HasPrefix(n, "holds:") {
				fmt.Fprintf(&b, " | %s", n)
			}
		}
		b.WriteString("\n")
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "    VIOLATION: %s\n", firstLine(v))
		}
		if r.Dir != "" {
			fmt.Fprintf(&b, "    report: %s\n", r.Dir)
		}
	}
	if *trials > 0 && ctx.Err() == nil {
		fig, err := figures(ctx, env, *trials)
		if err != nil {
			fmt.Fprintf(&b, "figures: %v\n", err)
		}
		if fig != nil {
			load, _ := os.ReadFile("/proc/loadavg")
			fmt.Fprintf(&b, "\n# figures (3 nodes, default settings: rtt 10 ms, election 15 ticks; load average during the run: %s)\n%s",
				strings.TrimSpace(string(load)), fig)
		}
	}
	fmt.Fprintf(&b, "\n%d scenario(s) failed; total %v\n", failed, time.Since(start).Round(time.Second))
	fmt.Print(b.String())
	if *out != "" {
		os.MkdirAll(filepath.Dir(*out), 0o755)
		if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	if failed > 0 {
		return 1
	}
	return 0
}

func figures(ctx context.Context, env chaos.Env, trials int) (*chaos.Figures, error) {
	dir, err := os.MkdirTemp("", "warden-chaos-figures-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	log := chaos.NewEventLog(os.Stderr)
	c, err := chaos.StartCluster(ctx, chaos.Options{Nodes: 3, Binary: env.Binary, Dir: dir, Seed: env.Seed, LogLevel: "warn"}, log)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return chaos.MeasureFigures(ctx, c, trials)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// clientMode is one lock-set client process: it prints "ACK <elem>" for
// every add the fenced resource accepted, until SIGTERM.
func clientMode(args []string) int {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	endpoints := fs.String("endpoints", "", "node client addresses")
	oracle := fs.String("oracle", "", "fenced resource URL")
	path := fs.String("path", "/set/s0/lock", "lock path")
	name := fs.String("name", "proc", "element prefix")
	ttl := fs.Duration("ttl", 2*time.Second, "session TTL")
	hold := fs.Duration("hold", 300*time.Millisecond, "time between read and write")
	fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var acks atomic.Int64
	fc := &chaos.FencedClient{Name: *name, Endpoints: strings.Split(*endpoints, ","), Oracle: *oracle, Path: *path, TTL: *ttl, Hold: *hold,
		OnAck: func(elem string) { acks.Add(1); fmt.Printf("ACK %s\n", elem) }}
	if err := fc.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
