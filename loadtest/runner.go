package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes one scenario run. Zero fields take the defaults of
// Defaults().
type Config struct {
	Scenario string        `json:"scenario"`
	Duration time.Duration `json:"duration"` // measured time
	Warmup   time.Duration `json:"warmup"`   // time before measuring starts
	Clients  int           `json:"clients"`  // concurrent workers (closed loop), or the concurrency cap (open loop)
	Rate     float64       `json:"rate"`     // > 0: open loop, operations (cycles) per second
	Prefix   string        `json:"prefix"`   // first path component, unique per run

	Paths      int           `json:"paths"`       // uncontended: distinct paths per worker
	HotLocks   int           `json:"hot_locks"`   // contended: locks shared by all workers
	Hold       time.Duration `json:"hold"`        // contended/elections: time held before release
	Depths     int           `json:"depths"`      // hierarchical: depths used below the namespace
	Sessions   int           `json:"sessions"`    // sessions scenario
	SessionTTL time.Duration `json:"session_ttl"` // sessions scenario
	Elections  int           `json:"elections"`   // elections: distinct elections
	Watchers   int           `json:"watchers"`    // watch fan-out
	Interval   time.Duration `json:"interval"`    // watch fan-out: time between releases
	Locks      int           `json:"locks"`       // held: locks to hold

	SlowOver time.Duration `json:"slow_over,omitempty"` // > 0: list every operation slower than this (Result.Slow)
	// OnMeasure, when set, is called (in its own goroutine) when the
	// measured time begins, e.g. to start traces of the servers.
	OnMeasure func() `json:"-"`

	PIDs     []int     `json:"pids,omitempty"` // server processes whose CPU and RSS are sampled
	Progress io.Writer `json:"-"`              // where a progress bar goes (nil: none)
}

// Scenarios lists the scenario names in the order reports show them.
var Scenarios = []string{"uncontended", "contended", "hierarchical", "sessions", "elections", "watch", "held"}

// Defaults fills zero fields.
func (c Config) Defaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defd(&c.Duration, 10*time.Second)
	def(&c.Clients, 64)
	def(&c.Paths, 16)
	def(&c.HotLocks, 1)
	def(&c.Depths, 4)
	def(&c.Sessions, 10000)
	defd(&c.SessionTTL, 10*time.Second)
	def(&c.Elections, 1)
	def(&c.Watchers, 1000)
	defd(&c.Interval, 200*time.Millisecond)
	def(&c.Locks, 1000000)
	if c.Prefix == "" {
		c.Prefix = fmt.Sprintf("lt%06x", rand.Uint32()&0xffffff)
	}
	return c
}

// Result is what one run measured.
type Result struct {
	Scenario    string             `json:"scenario"`
	Driver      string             `json:"driver"`
	Version     string             `json:"version,omitempty"`
	Mode        string             `json:"mode"` // closed or open
	Clients     int                `json:"clients"`
	Rate        float64            `json:"rate,omitempty"`
	Params      map[string]string  `json:"params,omitempty"`
	Started     time.Time          `json:"started"`
	Measured    time.Time          `json:"measured"` // when the measured time began (after warm-up)
	ElapsedS    float64            `json:"elapsed_s"`
	Ops         map[string]Stats   `json:"ops"`
	Errors      map[string]int64   `json:"errors"`
	Metrics     map[string]float64 `json:"metrics"`
	Series      []Second           `json:"series"`
	Unsupported string             `json:"unsupported,omitempty"`
	Notes       []string           `json:"notes,omitempty"`
	Slow        []SlowOp           `json:"slow,omitempty"` // with Config.SlowOver, at most maxSlow
}

// SlowOp is one operation slower than Config.SlowOver, for lining tail
// latency up with server-side traces and logs by wall-clock time.
type SlowOp struct {
	Op      string  `json:"op"`
	Worker  int     `json:"worker"`
	StartMs float64 `json:"start_ms"` // start (or due) time, ms after Result.Measured
	EndMs   float64 `json:"end_ms"`
}

// Second is one point of the time series.
type Second struct {
	T      int     `json:"t"`
	Ops    int64   `json:"ops"`
	Errors int64   `json:"errors"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// ErrUnsupported marks a scenario the driver cannot run.
var ErrUnsupported = errors.New("loadtest: scenario not supported by this driver")

// Run runs one scenario against d. Every run is bounded: it ends after
// Warmup+Duration plus a grace period for in-flight operations.
func Run(ctx context.Context, d Driver, cfg Config) (*Result, error) {
	cfg = cfg.Defaults()
	sc, ok := scenarios[cfg.Scenario]
	if !ok {
		return nil, fmt.Errorf("loadtest: unknown scenario %q (have %v)", cfg.Scenario, Scenarios)
	}
	res := &Result{Scenario: cfg.Scenario, Driver: d.Name(), Mode: "closed", Clients: cfg.Clients,
		Started: time.Now().UTC(), Metrics: map[string]float64{}, Params: map[string]string{}}
	if cfg.Rate > 0 {
		res.Mode, res.Rate = "open", cfg.Rate
	}
	if v, ok := d.(Versioner); ok {
		vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res.Version = v.Version(vctx)
		cancel()
	}
	classify := genericCode
	if ec, ok := d.(ErrorCoder); ok {
		classify = func(err error) string {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return genericCode(err)
			}
			return ec.ErrorCode(err)
		}
	}
	env := &env{ctx: ctx, d: d, cfg: cfg, res: res, classify: classify}
	err := sc(env)
	if errors.Is(err, ErrUnsupported) {
		res.Unsupported = err.Error()
		return res, nil
	}
	return res, err
}

// env is what a scenario gets.
type env struct {
	ctx      context.Context
	d        Driver
	cfg      Config
	res      *Result
	classify func(error) string
	clients  []Client
}

// openClients makes n clients, one per worker, in parallel.
func (e *env) openClients(n int) ([]Client, error) {
	out := make([]Client, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range out {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
			defer cancel()
			out[i], errs[i] = e.d.NewClient(ctx, i)
		}()
	}
	wg.Wait()
	e.clients = out
	if err := errors.Join(errs...); err != nil {
		e.closeClients()
		return nil, fmt.Errorf("loadtest: open clients: %w", err)
	}
	return out, nil
}

func (e *env) closeClients() {
	var wg sync.WaitGroup
	for _, c := range e.clients {
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); _ = c.Close() }()
		}
	}
	wg.Wait()
	e.clients = nil
}

// opFunc runs one operation for worker w; t0 is when it started (closed
// loop) or was due (open loop), and latencies are measured from it. It
// returns when it ended if it read the clock then (else the zero time): the
// closed loop starts the next operation from it instead of reading the
// clock again.
type opFunc func(ctx context.Context, w int, rec *Recorder, t0 time.Time, i int64) time.Time

// drive runs op on cfg.Clients workers, closed or open loop, for
// Warmup+Duration, and fills the result. primary names the op whose latency
// and rate the time series and the progress bar show.
func (e *env) drive(primary string, op opFunc) {
	cfg := e.cfg
	start := time.Now()
	measure := start.Add(cfg.Warmup)
	end := measure.Add(cfg.Duration)
	r := newRun(primary, measure, e.classify)
	r.slowOver = cfg.SlowOver
	e.res.Measured = measure.UTC()
	if cfg.OnMeasure != nil {
		t := time.AfterFunc(cfg.Warmup, cfg.OnMeasure)
		defer t.Stop()
	}
	ctx, cancel := context.WithDeadline(e.ctx, end.Add(10*time.Second)) // grace for in-flight ops
	defer cancel()
	stopProgress := e.progress(r, start, end)
	cpu0 := sampleCPU(cfg.PIDs)
	self0 := selfCPU()
	// The generator's CPU from the start of the measured time, over the
	// operations counted there (lockRates): its cost per operation.
	var selfMeasure atomic.Int64
	selfMeasure.Store(int64(self0))
	if cfg.Warmup > 0 {
		t := time.AfterFunc(cfg.Warmup, func() { selfMeasure.Store(int64(selfCPU())) })
		defer t.Stop()
	}
	wait0, selfWait0 := sampleRunDelay(cfg.PIDs), runDelay(os.Getpid())
	io0, selfIO0 := sampleIO(cfg.PIDs), procIO(os.Getpid())
	var mem0 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < cfg.Clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A context per worker: its calls wait on their own Done
			// channel instead of all workers locking one.
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			rec := r.recorder()
			rec.worker = w
			var pace pacer
			defer rec.Flush()
			var ended time.Time
			for i := int64(0); ; i++ {
				t0 := ended
				if t0.IsZero() {
					t0 = time.Now()
				}
				if cfg.Rate > 0 {
					i = next.Add(1) - 1
					t0 = intendedAt(start, cfg.Rate, i)
					// An operation due after the end is never sent: at a low
					// rate a worker would otherwise sleep long past it.
					if !t0.Before(end) || !pace.sleepUntil(ctx, t0) {
						return
					}
				}
				if !t0.Before(end) || ctx.Err() != nil {
					return
				}
				if cfg.Rate > 0 {
					// How late the generator itself starts an operation (all
					// workers busy, or a timer that fired late): the part of
					// an open-loop latency spent before anything was sent.
					rec.Observe("start-lag", t0, nil)
				}
				ended = op(ctx, w, rec, t0, i)
			}
		}()
	}
	wg.Wait()
	stopProgress()
	elapsed := min(time.Since(measure), cfg.Duration)
	if elapsed <= 0 {
		elapsed = cfg.Duration
	}
	r.fill(e.res, cfg.Duration)
	e.res.Metrics["loadgen_cpu_s_measured"] = round6((selfCPU() - time.Duration(selfMeasure.Load())).Seconds())
	e.cpuMetrics(cpu0, self0, time.Since(start))
	e.runQueueMetrics(wait0, selfWait0, time.Since(start))
	e.ioMetrics(io0, selfIO0, time.Since(start))
	var mem1 runtime.MemStats
	runtime.ReadMemStats(&mem1)
	// The load generator's own GC work delays the operations it times.
	e.res.Metrics["loadgen_gc_cycles"] = float64(mem1.NumGC - mem0.NumGC)
	e.res.Metrics["loadgen_alloc_mb"] = round3(float64(mem1.TotalAlloc-mem0.TotalAlloc) / (1 << 20))
	_ = elapsed
}

// runQueueMetrics adds how long the servers' and the load generator's
// threads waited for a CPU, in thread-seconds per second of the run: the
// scheduling delay a crowded machine adds to every latency figure.
func (e *env) runQueueMetrics(wait0 map[int]time.Duration, self0 time.Duration, wall time.Duration) {
	var total float64
	for pid, w1 := range sampleRunDelay(e.cfg.PIDs) {
		total += (w1 - wait0[pid]).Seconds() / wall.Seconds()
	}
	if len(wait0) > 0 {
		e.res.Metrics["server_runq_wait"] = round3(total)
	}
	e.res.Metrics["loadgen_runq_wait"] = round3((runDelay(os.Getpid()) - self0).Seconds() / wall.Seconds())
}

// ioMetrics adds the read and write syscalls per second of every server
// and of the load generator, over the same window as the CPU figures.
func (e *env) ioMetrics(io0 map[int]ioCalls, self0 ioCalls, wall time.Duration) {
	rate := func(a, b uint64) float64 { return round3(float64(b-a) / wall.Seconds()) }
	for pid, c1 := range sampleIO(e.cfg.PIDs) {
		c0 := io0[pid]
		e.res.Metrics[fmt.Sprintf("reads_per_s_pid_%d", pid)] = rate(c0.reads, c1.reads)
		e.res.Metrics[fmt.Sprintf("writes_per_s_pid_%d", pid)] = rate(c0.writes, c1.writes)
	}
	self1 := procIO(os.Getpid())
	e.res.Metrics["loadgen_reads_per_s"] = rate(self0.reads, self1.reads)
	e.res.Metrics["loadgen_writes_per_s"] = rate(self0.writes, self1.writes)
}

// cpuMetrics adds server and load-generator CPU use over wall.
func (e *env) cpuMetrics(cpu0 map[int]time.Duration, self0 time.Duration, wall time.Duration) {
	if len(cpu0) > 0 {
		cpu1 := sampleCPU(e.cfg.PIDs)
		var total float64
		for pid, t0 := range cpu0 {
			c := (cpu1[pid] - t0).Seconds() / wall.Seconds()
			total += c
			e.res.Metrics[fmt.Sprintf("cpu_cores_pid_%d", pid)] = round3(c)
		}
		e.res.Metrics["server_cpu_cores"] = round3(total)
	}
	e.res.Metrics["loadgen_cpu_cores"] = round3((selfCPU() - self0).Seconds() / wall.Seconds())
	e.res.Metrics["nproc"] = float64(runtime.NumCPU())
	// The machine may be shared: the 1-minute load average says how much.
	e.res.Metrics["loadavg_1m"] = loadAvg()
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

func round6(v float64) float64 { return float64(int64(v*1e6+0.5)) / 1e6 }
