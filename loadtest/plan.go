package loadtest

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Step is one scenario configuration in a benchmark plan.
type Step struct {
	Label string
	Cfg   Config
}

// SelectSteps keeps the steps whose label, with trim cut from its front,
// starts with one of the comma-separated prefixes in only; an empty only
// keeps every step. It backs the --only flag of the bench commands.
func SelectSteps(steps []Step, only, trim string) []Step {
	if only == "" {
		return steps
	}
	var out []Step
	for _, st := range steps {
		label := strings.TrimPrefix(st.Label, trim)
		for _, p := range strings.Split(only, ",") {
			if p = strings.TrimSpace(p); p != "" && strings.HasPrefix(label, p) {
				out = append(out, st)
				break
			}
		}
	}
	return out
}

// Outcome is a step's repeated runs on one system and the run with the
// median headline figure.
type Outcome struct {
	System string    `json:"system"`
	Label  string    `json:"label"`
	Values []float64 `json:"values"` // headline figure of each run
	Median *Result   `json:"median"`
	Runs   []*Result `json:"runs"`
}

// Headline is the figure a scenario is judged by, and its unit.
func Headline(r *Result) (float64, string) {
	if r == nil || r.Unsupported != "" {
		return 0, ""
	}
	switch r.Scenario {
	case "uncontended", "hierarchical":
		if r.Rate > 0 {
			return r.Ops["acquire"].P99Ms, "acquire p99 ms"
		}
		return r.Metrics["lock_ops_per_s"], "lock ops/s"
	case "contended":
		return r.Metrics["handoffs_per_s"], "hand-offs/s"
	case "elections":
		return r.Metrics["leader_changes_per_s"], "leader changes/s"
	case "watch":
		return r.Ops["delivery"].P99Ms, "delivery p99 ms"
	case "sessions":
		return r.Metrics["server_cpu_cores"], "server cores"
	case "held":
		return r.Metrics["rss_mb_max_node"], "max RSS MB/node"
	}
	return 0, ""
}

// Probe waits until d grants and releases a lock, so runs start on a ready
// cluster.
func Probe(ctx context.Context, d Driver, path string) error {
	var last error
	for ctx.Err() == nil {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cl, err := d.NewClient(octx, 0)
		if err == nil {
			var h Held
			if h, err = cl.Lock(octx, path); err == nil {
				err = h.Unlock(octx)
			}
			_ = cl.Close()
		}
		cancel()
		if err == nil {
			return nil
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("loadtest: %s never became ready: %v", d.Name(), last)
}

// RunSteps runs every step repeat times against fresh drivers from mk and
// returns the outcomes. Progress lines go to log.
func RunSteps(ctx context.Context, system string, mk func() Driver, steps []Step, repeat int, pids []int, log io.Writer) ([]Outcome, error) {
	var out []Outcome
	for _, st := range steps {
		o := Outcome{System: system, Label: st.Label}
		for i := 0; i < repeat; i++ {
			d := mk()
			cfg := st.Cfg
			cfg.PIDs = pids
			res, err := Run(ctx, d, cfg)
			_ = d.Close()
			if err != nil {
				// A failed run is a finding, not the end of the benchmark.
				fmt.Fprintf(log, "%-10s %-34s run %d/%d failed: %v\n", system, st.Label, i+1, repeat, err)
				res = &Result{Scenario: cfg.Scenario, Driver: d.Name(), Clients: cfg.Clients,
					Unsupported: "failed: " + err.Error(), Metrics: map[string]float64{}}
				o.Runs = append(o.Runs, res)
				break
			}
			v, unit := Headline(res)
			var perOp string
			if us, ok := res.Metrics["loadgen_cpu_us_per_lock_op"]; ok {
				perOp = fmt.Sprintf("  loadgen %.2f µs/op", us)
			}
			fmt.Fprintf(log, "%-10s %-34s run %d/%d: %.3f %s  errors=%d%s\n", system, st.Label, i+1, repeat, v, unit, totalErrors(res), perOp)
			o.Runs = append(o.Runs, res)
			o.Values = append(o.Values, v)
			if res.Unsupported != "" || ctx.Err() != nil {
				break
			}
		}
		o.Median = medianRun(o.Runs)
		out = append(out, o)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

func totalErrors(r *Result) int64 {
	var n int64
	for _, v := range r.Errors {
		n += v
	}
	return n
}

// medianRun picks the run whose headline figure is the median (the lower
// middle one for an even count).
func medianRun(rs []*Result) *Result {
	if len(rs) == 0 {
		return nil
	}
	s := append([]*Result(nil), rs...)
	sort.SliceStable(s, func(i, j int) bool {
		a, _ := Headline(s[i])
		b, _ := Headline(s[j])
		return a < b
	})
	return s[(len(s)-1)/2]
}
