package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestHistMerge(t *testing.T) {
	a, b := NewHist(), NewHist()
	for i := 1; i <= 100; i++ {
		a.Record(time.Duration(i) * time.Millisecond)
	}
	b.Record(2 * time.Second)
	b.Record(-time.Second) // clamped to the minimum, never dropped
	a.Merge(b)
	a.Merge(nil)
	s := a.Stats(time.Second)
	if s.Count != 102 || s.Rate != 102 {
		t.Fatalf("count %d rate %g, want 102", s.Count, s.Rate)
	}
	if s.MaxMs < 1999 || s.MaxMs > 2001 {
		t.Fatalf("max %g ms, want 2000", s.MaxMs)
	}
	if s.P50Ms < 49 || s.P50Ms > 51 {
		t.Fatalf("p50 %g ms, want about 50", s.P50Ms)
	}
}

func TestRecorderMergesWorkersAndSeconds(t *testing.T) {
	start := time.Now().Add(-3 * time.Second)
	r := newRun("op", start, genericCode)
	for w := 0; w < 3; w++ {
		rec := r.recorder()
		for s := 0; s < 3; s++ {
			t0 := start.Add(time.Duration(s)*time.Second + 100*time.Millisecond)
			rec.ObserveAt("op", t0, t0.Add(time.Millisecond), nil)
		}
		rec.ObserveAt("op", start.Add(-time.Second), start, nil) // before measuring: ignored
		rec.ObserveAt("op", start, start, context0Err{})
		rec.Flush()
	}
	var res Result
	res.Metrics = map[string]float64{}
	r.fill(&res, 3*time.Second)
	if got := res.Ops["op"].Count; got != 9 {
		t.Fatalf("ops %d, want 9", got)
	}
	if len(res.Series) != 3 || res.Series[1].Ops != 3 {
		t.Fatalf("series %+v", res.Series)
	}
	if res.Errors["boom"] != 3 || res.Series[0].Errors != 3 {
		t.Fatalf("errors %v series %+v", res.Errors, res.Series[0])
	}
}

type context0Err struct{}

func (context0Err) Error() string { return "boom: detail" }

func TestOpenLoopSchedule(t *testing.T) {
	start := time.Unix(1000, 0)
	tests := []struct {
		name string
		rate float64
		i    int64
		want time.Duration
	}{
		{"first is due at once", 100, 0, 0},
		{"100/s spaces by 10ms", 100, 7, 70 * time.Millisecond},
		{"fractional rate", 0.5, 3, 6 * time.Second},
		{"high rate", 200000, 200000, time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := intendedAt(start, tc.rate, tc.i).Sub(start); got != tc.want {
				t.Fatalf("intendedAt = %v, want %v", got, tc.want)
			}
		})
	}
	if n := dueBy(time.Second, 100); n != 101 {
		t.Fatalf("dueBy(1s, 100/s) = %d, want 101", n)
	}
	if n := dueBy(-time.Second, 100); n != 0 {
		t.Fatalf("dueBy before start = %d", n)
	}
	// A reply 50ms after it was sent, sent 200ms late, costs 250ms.
	due := start.Add(time.Second)
	if l := openLoopLatency(due, due.Add(250*time.Millisecond)); l != 250*time.Millisecond {
		t.Fatalf("latency %v", l)
	}
	if l := openLoopLatency(due, due.Add(-time.Millisecond)); l != 0 {
		t.Fatalf("early completion latency %v", l)
	}
}

func sampleReport() *Report {
	r := &Result{Scenario: "uncontended", Driver: "warden", Mode: "closed", Clients: 8, ElapsedS: 2,
		Ops:    map[string]Stats{"cycle": {Count: 10, Rate: 5, P50Ms: 1, P99Ms: 2, P999Ms: 3, MaxMs: 4}},
		Errors: map[string]int64{"unavailable": 2}, Metrics: map[string]float64{"lock_ops_per_s": 10},
		Series: []Second{{T: 1, Ops: 5, P99Ms: 2}, {T: 2, Ops: 5, P99Ms: 1.5}}}
	u := &Result{Scenario: "sessions", Driver: "redis", Unsupported: "no bare sessions"}
	return &Report{Title: "test <report>", Machine: ThisMachine(), Results: []*Result{r, u}}
}

func TestReportRendering(t *testing.T) {
	rep := sampleReport()
	var txt, csvb, js, html bytes.Buffer
	if err := WriteText(&txt, rep.Results...); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"warden / uncontended", "cycle", "unavailable", "unsupported: no bare sessions"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}
	if err := WriteCSV(&csvb, rep.Results...); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(csvb.String(), "\n"); lines != 4 { // header, 1 summary, 2 seconds
		t.Errorf("csv has %d lines:\n%s", lines, csvb.String())
	}
	if err := WriteJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Results[0].Ops["cycle"].P99Ms != 2 {
		t.Fatalf("json round trip: %v %+v", err, back.Results)
	}
	if err := WriteHTML(&html, rep); err != nil {
		t.Fatal(err)
	}
	h := html.String()
	for _, want := range []string{"<svg", "polyline", "test &lt;report&gt;", "no bare sessions"} {
		if !strings.Contains(h, want) {
			t.Errorf("html lacks %q", want)
		}
	}
	for _, banned := range []string{"<script", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(h, `xmlns="http://www.w3.org/2000/svg"`, ""), banned) {
			t.Errorf("html is not self-contained: has %q", banned)
		}
	}
}

func TestNiceMax(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, 3: 5, 7: 10, 120: 200, 0.03: 0.05} {
		if got := niceMax(in); got < want*0.999 || got > want*1.001 {
			t.Errorf("niceMax(%g) = %g, want %g", in, got, want)
		}
	}
}

func TestMedianRun(t *testing.T) {
	mk := func(v float64) *Result {
		return &Result{Scenario: "contended", Metrics: map[string]float64{"handoffs_per_s": v}}
	}
	rs := []*Result{mk(30), mk(10), mk(20)}
	if got, _ := Headline(medianRun(rs)); got != 20 {
		t.Fatalf("median %g, want 20", got)
	}
	if medianRun(nil) != nil {
		t.Fatal("median of nothing")
	}
}

// countingDriver grants every lock at once and counts the grants.
type countingDriver struct{ locks atomic.Int64 }

func (d *countingDriver) Name() string { return "counting" }
func (d *countingDriver) NewClient(context.Context, int) (Client, error) {
	return countingClient{d}, nil
}
func (d *countingDriver) Close() error { return nil }

type countingClient struct{ d *countingDriver }

func (c countingClient) Lock(context.Context, string) (Held, error) {
	c.d.locks.Add(1)
	return c, nil
}
func (c countingClient) Unlock(context.Context) error { return nil }
func (c countingClient) Close() error                 { return nil }

// At a rate far below the number of workers most workers' next operation
// is due after the run ends: they must stop, not sleep until it is due (a
// thousand workers at 1/s used to keep the run alive for 1000 s).
func TestOpenLoopStopsAtTheEnd(t *testing.T) {
	d := &countingDriver{}
	res, err := Run(context.Background(), d, Config{Scenario: "uncontended", Clients: 1000, Rate: 1,
		Duration: 50 * time.Millisecond, Warmup: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if n := d.locks.Load(); n != 1 {
		t.Fatalf("%d locks taken, want 1 (only the first operation is due before the end)", n)
	}
	if res.Measured.IsZero() {
		t.Fatal("no measurement start in the result")
	}
}

// Workers must not each own full-precision histograms: 1024 open-loop
// workers recording four operations allocated about 670 MB in the first
// second of measurement (160 KB per histogram), which stalled the load
// generator and made that second's tail.
func TestRecorderMemoryPerWorker(t *testing.T) {
	start := time.Now().Add(-time.Second)
	r := newRun("cycle", start, genericCode)
	recs := make([]*Recorder, 1024)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for w := range recs {
		recs[w] = r.recorder()
		for _, op := range []string{"acquire", "release", "cycle", "start-lag"} {
			recs[w].ObserveAt(op, start, start.Add(time.Millisecond), nil)
		}
	}
	runtime.ReadMemStats(&after)
	if perWorker := (after.TotalAlloc - before.TotalAlloc) / uint64(len(recs)); perWorker > 16<<10 {
		t.Fatalf("%d bytes allocated per worker's first observations, want at most 16 KiB", perWorker)
	}
	for _, rec := range recs {
		rec.Flush()
	}
	var res Result
	r.fill(&res, time.Second)
	if n := res.Ops["cycle"].Count; n != 1024 {
		t.Fatalf("%d cycles recorded, want 1024", n)
	}
	if len(res.Series) != 1 || res.Series[0].Ops != 1024 {
		t.Fatalf("series %+v", res.Series)
	}
}

func TestSelectSteps(t *testing.T) {
	steps := []Step{{Label: "shards=4 uncontended c=1"}, {Label: "shards=4 uncontended c=64"},
		{Label: "shards=4 contended c=32 hot=1"}, {Label: "shards=4 watch w=1000"}}
	for _, tc := range []struct {
		name, only, trim string
		want             []string
	}{
		{"empty keeps all", "", "shards=4 ", []string{"shards=4 uncontended c=1", "shards=4 uncontended c=64", "shards=4 contended c=32 hot=1", "shards=4 watch w=1000"}},
		{"prefix after trim", "contended", "shards=4 ", []string{"shards=4 contended c=32 hot=1"}},
		{"several, spaces", "uncontended c=64, watch", "shards=4 ", []string{"shards=4 uncontended c=64", "shards=4 watch w=1000"}},
		{"no trim: prefix must match the label", "contended", "", nil},
		{"empty entries match nothing", "contended,", "shards=4 ", []string{"shards=4 contended c=32 hot=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, st := range SelectSteps(steps, tc.only, tc.trim) {
				got = append(got, st.Label)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("SelectSteps(%q, %q) = %q, want %q", tc.only, tc.trim, got, tc.want)
			}
		})
	}
}

// spinningDriver grants every lock after burning spin of CPU (wall time,
// on a busy machine somewhat less CPU).
type spinningDriver struct{ spin time.Duration }

func (d spinningDriver) Name() string { return "spinning" }
func (d spinningDriver) NewClient(context.Context, int) (Client, error) {
	return spinningClient(d), nil
}
func (d spinningDriver) Close() error { return nil }

type spinningClient spinningDriver

func (c spinningClient) Lock(context.Context, string) (Held, error) {
	for t0 := time.Now(); time.Since(t0) < c.spin; {
	}
	return c, nil
}
func (c spinningClient) Unlock(context.Context) error { return nil }
func (c spinningClient) Close() error                 { return nil }

// The generator's CPU per lock operation is the CPU of the measured time
// over the operations counted in it: a lock that burns 200 µs (half of it
// per lock op, an acquire and a release per cycle) reads as about 100 µs.
func TestLoadgenCPUPerLockOp(t *testing.T) {
	res, err := Run(context.Background(), spinningDriver{200 * time.Microsecond}, Config{Scenario: "uncontended",
		Clients: 1, Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	us, ok := res.Metrics["loadgen_cpu_us_per_lock_op"]
	if !ok {
		t.Fatalf("no loadgen_cpu_us_per_lock_op in %v", res.Metrics)
	}
	// Wide bounds: the machine may be shared, and the generator's own
	// bookkeeping adds a little.
	if us < 10 || us > 1000 {
		t.Fatalf("loadgen_cpu_us_per_lock_op = %g, want about 100", us)
	}
	n := res.Ops["acquire"].Count + res.Ops["release"].Count
	if want := res.Metrics["loadgen_cpu_s_measured"] * 1e6 / float64(n); math.Abs(want-us) > 0.01 {
		t.Fatalf("loadgen_cpu_us_per_lock_op = %g, want CPU over the measured ops %g", us, want)
	}
}
