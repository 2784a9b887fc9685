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
	// done counts successful primary ops for the progress display. Workers
	// add to it once per second: an add per operation bounced the cache
	// line that every observation reads (measureStart) between the cores.
	done     atomic.Int64
	slowOver time.Duration
	slowN    atomic.Int64 // slow operations listed so far (at most maxSlow)

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

// Recorder collects one worker's observations. It buffers raw latencies and
// adds them to the run's shared histograms in batches: a full-precision
// histogram is 160 KB, and one per worker and operation (1024 open-loop
// workers, four operations) made the load generator allocate and zero about
// 600 MB in the first second of measurement, which stalled it (GC assists,
// page faults) and showed up as that second's tail latency.
type Recorder struct {
	run     *run
	pending []opLatencies // latencies not yet in run.ops, one entry per op name
	errs    map[string]int64
	sec     int
	secOps  int64
	secErrs int64
	secLat  []time.Duration // primary latencies of second sec
	worker  int
	slow    []SlowOp
}

// opLatencies is one operation's buffered latencies. A worker records two
// to four operations: a scan of a slice finds one faster than a string-keyed
// map lookup per observation (7 % of the load generator's CPU),
// and the names are the scenario's literals, so they usually compare equal by
// pointer.
type opLatencies struct {
	op  string
	lat []time.Duration
}

// flushEvery is how many latencies of one operation a Recorder buffers
// before adding them to the shared histogram (one lock per batch).
const flushEvery = 256

func (r *run) recorder() *Recorder {
	return &Recorder{run: r, errs: map[string]int64{}, sec: -1}
}

// buffer returns op's latency buffer, adding one on first use.
func (rec *Recorder) buffer(op string) *opLatencies {
	for i := range rec.pending {
		if rec.pending[i].op == op {
			return &rec.pending[i]
		}
	}
	rec.pending = append(rec.pending, opLatencies{op: op})
	return &rec.pending[len(rec.pending)-1]
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
	d := end.Sub(t0)
	b := rec.buffer(op)
	b.lat = append(b.lat, d)
	if len(b.lat) >= flushEvery {
		rec.run.record(op, b.lat)
		b.lat = b.lat[:0]
	}
	if so := rec.run.slowOver; so > 0 && d > so && rec.run.slowN.Add(1) <= maxSlow {
		ms := func(t time.Time) float64 { return float64(t.Sub(rec.run.measureStart).Microseconds()) / 1000 }
		rec.slow = append(rec.slow, SlowOp{Op: op, Worker: rec.worker, StartMs: ms(t0), EndMs: ms(end)})
	}
	if op == rec.run.primary {
		rec.secOps++
		rec.secLat = append(rec.secLat, d)
	}
}

// record adds buffered latencies of op to the shared histogram.
func (r *run) record(op string, lat []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.ops[op]
	if h == nil {
		h = NewHist()
		r.ops[op] = h
	}
	for _, d := range lat {
		h.Record(d)
	}
}

// Error records a failure that has no operation of its own (a missed watch event).
func (rec *Recorder) Error(code string) { rec.errs[code]++ }

func (rec *Recorder) flushSecond() {
	if rec.sec < 0 || (rec.secOps == 0 && rec.secErrs == 0) {
		return
	}
	r := rec.run
	r.done.Add(rec.secOps)
	r.mu.Lock()
	for len(r.seconds) <= rec.sec {
		r.seconds = append(r.seconds, &second{hist: newCoarseHist()})
	}
	sl := r.seconds[rec.sec]
	sl.ops += rec.secOps
	sl.errs += rec.secErrs
	for _, d := range rec.secLat {
		sl.hist.Record(d)
	}
	r.mu.Unlock()
	rec.secOps, rec.secErrs = 0, 0
	rec.secLat = rec.secLat[:0]
}

// Flush merges everything the worker recorded into the run.
func (rec *Recorder) Flush() {
	rec.flushSecond()
	for _, b := range rec.pending {
		if len(b.lat) > 0 {
			rec.run.record(b.op, b.lat)
		}
	}
	r := rec.run
	r.mu.Lock()
	defer r.mu.Unlock()
	for code, n := range rec.errs {
		r.errs[code] += n
	}
	r.slow = append(r.slow, rec.slow...)
	rec.pending, rec.errs, rec.slow = nil, map[string]int64{}, nil
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
