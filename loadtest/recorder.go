package loadtest

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// run is the shared state of one scenario run: per-second slots and the
// merged histograms. Workers record into their own Recorder and merge into
// run when a second ends, so the hot path takes no shared lock.
type run struct {
	primary      string // the op whose latency the time series shows
	measureStart time.Time
	classify     func(error) string
	done         atomic.Int64 // successful primary ops, for the progress display
	slowOver     time.Duration

	mu      sync.Mutex
	ops     map[string]*Hist
	errs    map[string]int64
	seconds []*second
	slow    []SlowOp
}

// maxSlow bounds the slow operations a run lists.
const maxSlow = 50000

type second struct {
	ops, errs int64
	hist      *Hist
}

func newRun(primary string, measureStart time.Time, classify func(error) string) *run {
	return &run{primary: primary, measureStart: measureStart, classify: classify,
		ops: map[string]*Hist{}, errs: map[string]int64{}}
}

// Recorder collects one worker's observations.
type Recorder struct {
	run     *run
	ops     map[string]*Hist
	errs    map[string]int64
	sec     int
	secOps  int64
	secErrs int64
	secHist *Hist
	worker  int
	slow    []SlowOp
}

func (r *run) recorder() *Recorder {
	return &Recorder{run: r, ops: map[string]*Hist{}, errs: map[string]int64{}, sec: -1, secHist: newCoarseHist()}
}

// Observe records one operation that started (or was due) at t0 and ended
// now. Operations due before the warm-up ended are not recorded.
func (rec *Recorder) Observe(op string, t0 time.Time, err error) {
	rec.ObserveAt(op, t0, time.Now(), err)
}

// ObserveAt is Observe with an explicit end time.
func (rec *Recorder) ObserveAt(op string, t0, end time.Time, err error) {
	if t0.Before(rec.run.measureStart) {
		return
	}
	s := int(end.Sub(rec.run.measureStart) / time.Second)
	if s != rec.sec {
		rec.flushSecond()
		rec.sec = s
	}
	if err != nil {
		rec.errs[rec.run.classify(err)]++
		rec.secErrs++
		return
	}
	h := rec.ops[op]
	if h == nil {
		h = NewHist()
		rec.ops[op] = h
	}
	h.Record(end.Sub(t0))
	if so := rec.run.slowOver; so > 0 && end.Sub(t0) > so && len(rec.slow) < maxSlow {
		ms := func(t time.Time) float64 { return float64(t.Sub(rec.run.measureStart).Microseconds()) / 1000 }
		rec.slow = append(rec.slow, SlowOp{Op: op, Worker: rec.worker, StartMs: ms(t0), EndMs: ms(end)})
	}
	if op == rec.run.primary {
		rec.secOps++
		rec.secHist.Record(end.Sub(t0))
		rec.run.done.Add(1)
	}
}

// Error records a failure that has no operation of its own (a missed watch event).
func (rec *Recorder) Error(code string) { rec.errs[code]++ }

func (rec *Recorder) flushSecond() {
	if rec.sec < 0 || (rec.secOps == 0 && rec.secErrs == 0) {
		return
	}
	r := rec.run
	r.mu.Lock()
	for len(r.seconds) <= rec.sec {
		r.seconds = append(r.seconds, &second{hist: newCoarseHist()})
	}
	sl := r.seconds[rec.sec]
	sl.ops += rec.secOps
	sl.errs += rec.secErrs
	sl.hist.Merge(rec.secHist)
	r.mu.Unlock()
	rec.secOps, rec.secErrs = 0, 0
	rec.secHist.Reset()
}

// Flush merges everything the worker recorded into the run.
func (rec *Recorder) Flush() {
	rec.flushSecond()
	r := rec.run
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, h := range rec.ops {
		if r.ops[name] == nil {
			r.ops[name] = NewHist()
		}
		r.ops[name].Merge(h)
	}
	for code, n := range rec.errs {
		r.errs[code] += n
	}
	r.slow = append(r.slow, rec.slow[:min(len(rec.slow), maxSlow-len(r.slow))]...)
	rec.ops, rec.errs, rec.slow = map[string]*Hist{}, map[string]int64{}, nil
}

// fill writes the run's figures into res.
func (r *run) fill(res *Result, elapsed time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res.ElapsedS = elapsed.Seconds()
	res.Ops = map[string]Stats{}
	for name, h := range r.ops {
		res.Ops[name] = h.Stats(elapsed)
	}
	res.Errors = map[string]int64{}
	for code, n := range r.errs {
		res.Errors[code] = n
	}
	res.Slow = r.slow
	sort.Slice(res.Slow, func(i, j int) bool { return res.Slow[i].StartMs < res.Slow[j].StartMs })
	n := int(elapsed / time.Second)
	for i := 0; i < len(r.seconds) && i < n; i++ {
		sl := r.seconds[i]
		res.Series = append(res.Series, Second{T: i + 1, Ops: sl.ops, Errors: sl.errs,
			P50Ms: sl.hist.Percentile(50), P99Ms: sl.hist.Percentile(99), MaxMs: sl.hist.Percentile(100)})
	}
}

// genericCode classifies errors for drivers without an ErrorCoder.
func genericCode(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	msg := err.Error()
	if i := strings.IndexAny(msg, ":\n"); i > 0 && i < 60 {
		msg = msg[:i]
	}
	if len(msg) > 60 {
		msg = msg[:60]
	}
	return msg
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
