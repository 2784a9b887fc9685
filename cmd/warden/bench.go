package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	rpprof "runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/loadtest"
)

// benchCmd is `warden bench`: the load generator against a running cluster.
func benchCmd() *cobra.Command {
	var (
		cfg                    loadtest.Config
		scenarioList, clients  string
		pids                   string
		conns, pool, repeat    int
		ttl                    time.Duration
		htmlOut, jsonOut, csvO string
		title                  string
		noProgress             bool
		cpuProfile             string
	)
	cmd := &cobra.Command{
		Use:   "bench [flags]",
		Short: "Generate load against a cluster and report latency and throughput",
		Long: `Runs load-test scenarios against the cluster at --endpoints.

Scenarios: ` + strings.Join(loadtest.Scenarios, ", ") + `.
Closed loop by default (--clients workers, each waits for its answer);
--rate makes it open loop: operations are due at fixed times and latency
is measured from the due time, so a stall is charged to every operation it
delayed (no coordinated omission). --clients then caps the concurrency.
--clients takes a list (1,8,64) to sweep. Output: -o table|json|csv on
stdout, plus --html/--json/--csv files.`,
		Example: `  warden bench --scenario uncontended --clients 1,16,64 --duration 10s
  warden bench --scenario uncontended --rate 20000 --clients 512
  warden bench --scenario contended --hot-locks 1 --clients 32
  warden bench --scenario sessions --sessions 100000 --pids 1234,1235,1236
  warden bench --scenario watch --watchers 1000 --html report.html`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext()
			defer stop()
			var err error
			if cfg.PIDs, err = parseInts(pids); err != nil {
				return &exitError{code: exitFailure, err: fmt.Errorf("--pids: %w", err)}
			}
			sweep, err := parseInts(clients)
			if err != nil || len(sweep) == 0 {
				return &exitError{code: exitFailure, err: fmt.Errorf("--clients: want a list of numbers")}
			}
			if cpuProfile != "" {
				stopProfile, err := startCPUProfile(cpuProfile)
				if err != nil {
					return &exitError{code: exitFailure, err: err}
				}
				defer stopProfile()
			}
			if !noProgress && isTerminal(os.Stderr) {
				cfg.Progress = os.Stderr
			}
			rep := &loadtest.Report{Title: title, Machine: loadtest.ThisMachine(), Command: "warden " + strings.Join(os.Args[1:], " ")}
			for _, sc := range strings.Split(scenarioList, ",") {
				for _, n := range sweep {
					for r := 0; r < repeat; r++ {
						c := cfg
						c.Scenario, c.Clients, c.Prefix = strings.TrimSpace(sc), n, ""
						d := loadtest.NewWarden(loadtest.WardenOptions{Endpoints: strings.Split(gf.endpoints, ","),
							Conns: conns, Pool: pool, TTL: ttl})
						res, err := loadtest.Run(ctx, d, c)
						_ = d.Close()
						if err != nil {
							return &exitError{code: exitFailure, err: err}
						}
						rep.Results = append(rep.Results, res)
						if gf.output == "table" {
							_ = loadtest.WriteText(os.Stdout, res)
						}
						if ctx.Err() != nil {
							return &exitError{code: exitInterrupted, err: ctx.Err()}
						}
					}
				}
			}
			switch gf.output {
			case "json":
				_ = loadtest.WriteJSON(os.Stdout, rep)
			case "csv":
				_ = loadtest.WriteCSV(os.Stdout, rep.Results...)
			}
			return writeReportFiles(rep, htmlOut, jsonOut, csvO)
		},
	}
	f := cmd.Flags()
	f.StringVar(&scenarioList, "scenario", "uncontended", "comma-separated scenarios: "+strings.Join(loadtest.Scenarios, ","))
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "measured time per run")
	f.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "unmeasured time before each run")
	f.StringVar(&clients, "clients", "64", "concurrent workers, or a comma-separated list to sweep")
	f.Float64Var(&cfg.Rate, "rate", 0, "open loop: operations per second (0 = closed loop)")
	f.IntVar(&repeat, "repeat", 1, "runs per scenario and client count")
	f.IntVar(&conns, "conns", 4, "client instances the workers share")
	f.IntVar(&pool, "pool", 2, "connections per client instance")
	f.DurationVar(&ttl, "ttl", 30*time.Second, "session TTL of the workers")
	f.IntVar(&cfg.Paths, "paths", 16, "uncontended: distinct paths per worker")
	f.IntVar(&cfg.HotLocks, "hot-locks", 1, "contended: number of hot locks")
	f.DurationVar(&cfg.Hold, "hold", 0, "contended/elections: time held before release")
	f.IntVar(&cfg.Depths, "depths", 4, "hierarchical: lock depths below each namespace")
	f.IntVar(&cfg.Sessions, "sessions", 10000, "sessions: how many to keep alive")
	f.DurationVar(&cfg.SessionTTL, "session-ttl", 10*time.Second, "sessions: their TTL (kept alive at TTL/3)")
	f.IntVar(&cfg.Elections, "elections", 1, "elections: distinct elections the candidates share")
	f.IntVar(&cfg.Watchers, "watchers", 1000, "watch: watchers of the one lock")
	f.DurationVar(&cfg.Interval, "interval", 200*time.Millisecond, "watch: time between releases")
	f.IntVar(&cfg.Locks, "locks", 1000000, "held: locks to acquire and keep")
	f.StringVar(&pids, "pids", "", "server process ids whose CPU and RSS to sample (comma-separated)")
	f.StringVar(&htmlOut, "html", "", "write an HTML report with charts to this file")
	f.StringVar(&jsonOut, "json", "", "write the JSON report to this file")
	f.StringVar(&csvO, "csv", "", "write CSV to this file")
	f.StringVar(&title, "title", "Warden load test", "report title")
	f.BoolVar(&noProgress, "no-progress", false, "no progress bar even on a terminal")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write the load generator's own CPU profile (warmup included) to this file")
	bound(f, positive, "duration", "repeat", "conns", "pool", "ttl", "paths", "hot-locks", "depths", "sessions",
		"session-ttl", "elections", "watchers", "interval", "locks")
	bound(f, nonNegative, "warmup", "rate", "hold")
	cmd.AddCommand(benchNodeCmd())
	return cmd
}

// benchNodeCmd is `warden bench node`: `warden serve` with the Go profiler on
// an HTTP port, for CPU profiles of a node under load.
func benchNodeCmd() *cobra.Command {
	cmd := serveCmd()
	cmd.Use, cmd.Short, cmd.Hidden = "node", "Run one node like serve, with net/http/pprof on --pprof", true
	var addr string
	var contention bool
	cmd.Flags().StringVar(&addr, "pprof", "127.0.0.1:6060", "pprof HTTP address")
	cmd.Flags().BoolVar(&contention, "contention", false, "record blocking and mutex profiles (/debug/pprof/block, /debug/pprof/mutex)")
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if contention {
			runtime.SetBlockProfileRate(10000) // one sample per 10 µs blocked
			runtime.SetMutexProfileFraction(10)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.ListenAndServe() }()
		defer srv.Shutdown(context.Background())
		return run(c, args)
	}
	return cmd
}

// startCPUProfile profiles this process into path until the returned
// function is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := rpprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { rpprof.StopCPUProfile(); f.Close() }, nil
}

func writeReportFiles(rep *loadtest.Report, htmlOut, jsonOut, csvOut string) error {
	write := func(path string, f func(*os.File) error) error {
		if path == "" {
			return nil
		}
		fh, err := os.Create(path)
		if err != nil {
			return &exitError{code: exitFailure, err: err}
		}
		if err := f(fh); err != nil {
			fh.Close()
			return &exitError{code: exitFailure, err: err}
		}
		return fh.Close()
	}
	if err := write(htmlOut, func(f *os.File) error { return loadtest.WriteHTML(f, rep) }); err != nil {
		return err
	}
	if err := write(jsonOut, func(f *os.File) error { return loadtest.WriteJSON(f, rep) }); err != nil {
		return err
	}
	return write(csvOut, func(f *os.File) error { return loadtest.WriteCSV(f, rep.Results...) })
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
