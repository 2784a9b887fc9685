package loadtest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var scenarios = map[string]func(*env) error{
	"uncontended":  uncontended,
	"contended":    contended,
	"hierarchical": hierarchical,
	"sessions":     sessions,
	"elections":    elections,
	"watch":        watchFanOut,
	"held":         held,
}

// cycle acquires lk's lock, then releases it, recording acquireOp,
// "release" and "cycle" (acquire due time to release done). It returns when
// the release ended, which a closed loop takes as its next operation's
// start: one clock read per lock operation.
func cycle(ctx context.Context, lk Locker, rec *Recorder, t0 time.Time, acquireOp string, hold time.Duration) time.Time {
	h, err := lk.Lock(ctx)
	t1 := time.Now()
	rec.ObserveAt(acquireOp, t0, t1, err)
	if err != nil {
		return t1
	}
	if hold > 0 {
		time.Sleep(hold)
		t1 = time.Now()
	}
	err = h.Unlock(ctx)
	t2 := time.Now()
	rec.ObserveAt("release", t1, t2, err)
	if err == nil {
		rec.ObserveAt("cycle", t0, t2, nil)
	}
	return t2
}

// lockRates adds the committed lock operations per second (acquires plus
// releases), cycles per second, and the load generator's CPU per lock
// operation over the measured time (the client library's cost, mostly).
func lockRates(res *Result) {
	a, r, c := res.Ops["acquire"], res.Ops["release"], res.Ops["cycle"]
	res.Metrics["lock_ops_per_s"] = round3(a.Rate + r.Rate)
	res.Metrics["cycles_per_s"] = round3(c.Rate)
	if n := a.Count + r.Count; n > 0 {
		res.Metrics["loadgen_cpu_us_per_lock_op"] = round3(res.Metrics["loadgen_cpu_s_measured"] * 1e6 / float64(n))
	}
}

// uncontended: every worker cycles over its own paths, each in its own
// namespace, so the load spreads over every shard and nobody waits.
func uncontended(e *env) error {
	cls, err := e.openClients(e.cfg.Clients)
	if err != nil {
		return err
	}
	defer e.closeClients()
	e.res.Params["paths_per_worker"] = strconv.Itoa(e.cfg.Paths)
	// Paths and their locks are made before the clock starts: formatting
	// one per cycle was a few per cent of the load generator's CPU.
	lockers := make([][]Locker, len(cls))
	for w := range lockers {
		for k := 0; k < e.cfg.Paths; k++ {
			lockers[w] = append(lockers[w], lockerFor(cls[w], fmt.Sprintf("/%s/u%d-%d/lock", e.cfg.Prefix, w, k)))
		}
	}
	e.drive("cycle", func(ctx context.Context, w int, rec *Recorder, t0 time.Time, i int64) time.Time {
		return cycle(ctx, lockers[w][i%int64(e.cfg.Paths)], rec, t0, "acquire", 0)
	})
	lockRates(e.res)
	return nil
}

// contended: all workers queue on a few hot locks; every grant after the
// first is a hand-off from the previous holder.
func contended(e *env) error {
	cls, err := e.openClients(e.cfg.Clients)
	if err != nil {
		return err
	}
	defer e.closeClients()
	e.res.Params["hot_locks"] = strconv.Itoa(e.cfg.HotLocks)
	e.res.Params["hold"] = e.cfg.Hold.String()
	lockers := make([]Locker, len(cls))
	for w := range lockers {
		lockers[w] = lockerFor(cls[w], fmt.Sprintf("/%s/hot/l%d", e.cfg.Prefix, w%e.cfg.HotLocks))
	}
	e.drive("acquire", func(ctx context.Context, w int, rec *Recorder, t0 time.Time, i int64) time.Time {
		return cycle(ctx, lockers[w], rec, t0, "acquire", e.cfg.Hold)
	})
	lockRates(e.res)
	e.res.Metrics["handoffs_per_s"] = round3(e.res.Ops["acquire"].Rate)
	return nil
}

// hierarchical: each worker owns one namespace and cycles locks at depths
// 1..Depths below it, so every acquire checks ancestors and subtrees.
func hierarchical(e *env) error {
	cls, err := e.openClients(e.cfg.Clients)
	if err != nil {
		return err
	}
	defer e.closeClients()
	e.res.Params["depths"] = strconv.Itoa(e.cfg.Depths)
	e.drive("cycle", func(ctx context.Context, w int, rec *Recorder, t0 time.Time, i int64) time.Time {
		depth := 1 + int(i%int64(e.cfg.Depths))
		var b strings.Builder
		fmt.Fprintf(&b, "/%s/h%d", e.cfg.Prefix, w)
		for d := 1; d <= depth; d++ {
			fmt.Fprintf(&b, "/n%d", (i/int64(e.cfg.Depths)+int64(d))%4)
		}
		return cycle(ctx, boundPath{cls[w], b.String()}, rec, t0, fmt.Sprintf("acquire.depth%d", depth+2), 0)
	})
	var total float64
	for name, s := range e.res.Ops {
		if strings.HasPrefix(name, "acquire") {
			total += s.Rate
		}
	}
	e.res.Metrics["lock_ops_per_s"] = round3(total + e.res.Ops["release"].Rate)
	e.res.Metrics["cycles_per_s"] = round3(e.res.Ops["cycle"].Rate)
	return nil
}

// sessions: open Sessions leases, keep them alive for Duration and measure
// the CPU the servers spend on it.
func sessions(e *env) error {
	sk, ok := e.d.(SessionKeeper)
	if !ok {
		return fmt.Errorf("%w: no bare sessions", ErrUnsupported)
	}
	e.res.Params["sessions"] = strconv.Itoa(e.cfg.Sessions)
	e.res.Params["ttl"] = e.cfg.SessionTTL.String()
	openStart := time.Now()
	var opened atomic.Int64
	octx, cancel := context.WithTimeout(e.ctx, max(2*e.cfg.Duration, 2*time.Minute))
	defer cancel()
	alive, stop, err := sk.KeepSessions(octx, e.cfg.Sessions, e.cfg.SessionTTL, func() { opened.Add(1) })
	if err != nil {
		return err
	}
	defer stop()
	e.res.Metrics["sessions_open_s"] = round3(time.Since(openStart).Seconds())
	// Let the keepalive timers spread over a full period before measuring.
	settle := min(e.cfg.SessionTTL, 10*time.Second)
	time.Sleep(settle + e.cfg.Warmup)
	cpu0, self0, t0 := sampleCPU(e.cfg.PIDs), selfCPU(), time.Now()
	stopBar := e.progress(&run{primary: "sessions"}, t0, t0.Add(e.cfg.Duration))
	select {
	case <-time.After(e.cfg.Duration):
	case <-e.ctx.Done():
	}
	stopBar()
	e.cpuMetrics(cpu0, self0, time.Since(t0))
	e.res.ElapsedS = time.Since(t0).Seconds()
	n := alive()
	e.res.Metrics["sessions_alive"] = float64(n)
	e.res.Metrics["keepalives_per_s"] = round3(float64(n) * 3 / e.cfg.SessionTTL.Seconds())
	e.res.Ops, e.res.Errors = map[string]Stats{}, map[string]int64{}
	if lost := e.cfg.Sessions - n; lost > 0 {
		e.res.Errors["session lost"] = int64(lost)
	}
	e.rss()
	return nil
}

// elections: candidates campaign on a few elections; each leader holds for
// Hold and resigns, so leadership churns through the queue.
func elections(e *env) error {
	cls, err := e.openClients(e.cfg.Clients)
	if err != nil {
		return err
	}
	defer e.closeClients()
	if _, ok := cls[0].(Elector); !ok {
		return fmt.Errorf("%w: no elections", ErrUnsupported)
	}
	e.res.Params["elections"] = strconv.Itoa(e.cfg.Elections)
	e.res.Params["hold"] = e.cfg.Hold.String()
	e.drive("campaign", func(ctx context.Context, w int, rec *Recorder, t0 time.Time, i int64) time.Time {
		path := fmt.Sprintf("/%s/elect/e%d", e.cfg.Prefix, w%e.cfg.Elections)
		h, err := cls[w].(Elector).Campaign(ctx, path, fmt.Sprintf("candidate-%d", w))
		rec.Observe("campaign", t0, err)
		if err != nil {
			return time.Time{}
		}
		if e.cfg.Hold > 0 {
			time.Sleep(e.cfg.Hold)
		}
		t1 := time.Now()
		rec.Observe("resign", t1, h.Unlock(ctx))
		return time.Time{}
	})
	e.res.Metrics["leader_changes_per_s"] = round3(e.res.Ops["campaign"].Rate)
	return nil
}

// watchFanOut: Watchers watch one lock; a writer takes and releases it every
// Interval and each watcher records the delay from the release being sent
// to its event arriving. A release not seen within Interval counts as missed.
func watchFanOut(e *env) error {
	nc := min(e.cfg.Clients, e.cfg.Watchers) + 1
	cls, err := e.openClients(nc)
	if err != nil {
		return err
	}
	defer e.closeClients()
	for _, c := range cls {
		if _, ok := c.(Watcher); !ok {
			return fmt.Errorf("%w: no watches", ErrUnsupported)
		}
	}
	path := fmt.Sprintf("/%s/fan/lock", e.cfg.Prefix)
	e.res.Params["watchers"] = strconv.Itoa(e.cfg.Watchers)
	e.res.Params["interval"] = e.cfg.Interval.String()
	wctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var releasedAt atomic.Int64 // unix ns of the current release's send
	start := time.Now()
	r := newRun("delivery", start.Add(e.cfg.Warmup), e.classify)
	var seen, ready atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < e.cfg.Watchers; i++ {
		ch := make(chan time.Time, 64)
		cl := cls[1+i%(nc-1)]
		if err := cl.(Watcher).WatchReleases(wctx, path, ch); err != nil {
			return fmt.Errorf("loadtest: watcher %d: %w", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := r.recorder()
			defer rec.Flush()
			first := true
			for {
				select {
				case <-wctx.Done():
					return
				case at := <-ch:
					if first {
						first = false
						ready.Add(1)
					}
					if ns := releasedAt.Load(); ns != 0 {
						rec.ObserveAt("delivery", time.Unix(0, ns), at, nil)
						seen.Add(1)
					}
				}
			}
		}()
	}
	// Watches subscribe asynchronously: cycle the lock until every watcher
	// has seen a release (bounded), then measure.
	readyBy := time.Now().Add(60 * time.Second)
	for ready.Load() < int64(e.cfg.Watchers) && time.Now().Before(readyBy) && e.ctx.Err() == nil {
		octx, ocancel := context.WithTimeout(e.ctx, 10*time.Second)
		if h, err := cls[0].Lock(octx, path); err == nil {
			_ = h.Unlock(octx)
		}
		ocancel()
		time.Sleep(100 * time.Millisecond)
	}
	e.res.Metrics["watchers_ready"] = float64(ready.Load())
	e.res.Metrics["ready_s"] = round3(time.Since(start).Seconds())
	start = time.Now()
	r.measureStart = start.Add(e.cfg.Warmup)
	stopBar := e.progress(r, start, start.Add(e.cfg.Warmup+e.cfg.Duration))
	writer := r.recorder()
	var releases, missed int64
	measure := start.Add(e.cfg.Warmup)
	for time.Since(start) < e.cfg.Warmup+e.cfg.Duration && e.ctx.Err() == nil {
		octx, ocancel := context.WithTimeout(e.ctx, 10*time.Second)
		t0 := time.Now()
		h, err := cls[0].Lock(octx, path)
		writer.Observe("acquire", t0, err)
		if err == nil {
			time.Sleep(e.cfg.Interval / 4)
			before := seen.Load()
			t1 := time.Now()
			releasedAt.Store(t1.UnixNano())
			err = h.Unlock(octx)
			writer.Observe("release", t1, err)
			time.Sleep(e.cfg.Interval * 3 / 4)
			got := seen.Load() - before
			if t1.After(measure) {
				releases++
				missed += max(int64(e.cfg.Watchers)-got, 0)
			}
		}
		ocancel()
	}
	stopBar()
	writer.Flush()
	cancel()
	wg.Wait()
	r.fill(e.res, e.cfg.Duration)
	if missed > 0 {
		e.res.Errors["missed (not seen within interval)"] = missed
	}
	e.res.Metrics["releases"] = float64(releases)
	e.res.Metrics["deliveries_per_s"] = round3(e.res.Ops["delivery"].Rate)
	return nil
}

// held: acquire Locks distinct locks and keep them, then read the servers'
// resident memory. Lock j is /<prefix>/m<b%4096>/k<j>, where b = j/heldBatch.
// heldPipeline is how many acquires each client keeps in flight; heldBatch
// is how many locks one acquire takes when the driver can take several at
// once (MultiLocker: one AcquireMulti in one namespace, so one shard).
const (
	heldPipeline = 8
	heldBatch    = 16
	heldTries    = 3
)

func held(e *env) error {
	cls, err := e.openClients(e.cfg.Clients)
	if err != nil {
		return err
	}
	defer e.closeClients()
	rss0 := e.rssSample()
	e.res.Params["locks"] = strconv.Itoa(e.cfg.Locks)
	batch := 1
	if _, ok := cls[0].(MultiLocker); ok {
		batch = heldBatch
	}
	e.res.Params["locks_per_acquire"] = strconv.Itoa(batch)
	var next atomic.Int64
	var mu sync.Mutex
	// Each client keeps heldPipeline acquires in flight: one at a time per
	// client the fill is bound by round trips, not by the servers, and the
	// client multiplexes its requests on its connections anyway.
	holds := make([][]Held, len(cls)*heldPipeline)
	counts := make([]int, len(holds))
	start := time.Now()
	deadline := start.Add(e.cfg.Warmup + e.cfg.Duration)
	r := newRun("acquire", start, e.classify)
	stopBar := e.progress(r, start, deadline)
	ctx, cancel := context.WithDeadline(e.ctx, deadline.Add(10*time.Second))
	defer cancel()
	var wg sync.WaitGroup
	for g := range holds {
		c := cls[g%len(cls)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := r.recorder()
			defer rec.Flush()
			var paths []string
			for time.Now().Before(deadline) {
				b := next.Add(1) - 1
				j0, j1 := b*int64(batch), min((b+1)*int64(batch), int64(e.cfg.Locks))
				if j0 >= j1 {
					return
				}
				paths = paths[:0]
				for j := j0; j < j1; j++ {
					paths = append(paths, fmt.Sprintf("/%s/m%d/k%d", e.cfg.Prefix, b%4096, j))
				}
				// A failed multi-lock (a timeout under load) is tried again
				// (MultiLocker retries are safe: see wardenClient.LockAll):
				// the scenario measures memory with every lock held. A
				// single Lock is not: a retry of one that did apply would
				// wait for itself.
				tries := 1
				if batch > 1 {
					tries = heldTries
				}
				for try := 0; try < tries && time.Now().Before(deadline); try++ {
					t0 := time.Now()
					var h Held
					var err error
					if ml, ok := c.(MultiLocker); ok && batch > 1 {
						h, err = ml.LockAll(ctx, paths)
					} else {
						h, err = c.Lock(ctx, paths[0])
					}
					rec.Observe("acquire", t0, err)
					if err == nil {
						holds[g] = append(holds[g], h)
						counts[g] += len(paths)
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	stopBar()
	elapsed := time.Since(start)
	r.fill(e.res, elapsed)
	mu.Lock()
	var n int
	for _, k := range counts {
		n += k
	}
	mu.Unlock()
	e.res.Metrics["locks_held"] = float64(n)
	e.res.Metrics["fill_s"] = round3(elapsed.Seconds())
	time.Sleep(2 * time.Second) // let replicas finish applying
	rss1 := e.rssSample()
	var maxMB float64
	for pid, b := range rss1 {
		mb := float64(b) / (1 << 20)
		e.res.Metrics[fmt.Sprintf("rss_mb_pid_%d", pid)] = round3(mb)
		maxMB = max(maxMB, mb)
		if n > 0 {
			e.res.Metrics[fmt.Sprintf("bytes_per_lock_pid_%d", pid)] = round3(float64(b-rss0[pid]) / float64(n))
		}
	}
	if len(rss1) > 0 {
		e.res.Metrics["rss_mb_max_node"] = round3(maxMB)
	}
	if n < e.cfg.Locks {
		e.res.Notes = append(e.res.Notes, fmt.Sprintf("only %d of %d locks acquired within %s", n, e.cfg.Locks, e.cfg.Warmup+e.cfg.Duration))
	}
	return nil
}

func (e *env) rssSample() map[int]int64 {
	out := map[int]int64{}
	for _, pid := range e.cfg.PIDs {
		if b, err := ProcRSS(pid); err == nil {
			out[pid] = b
		}
	}
	return out
}

func (e *env) rss() {
	for pid, b := range e.rssSample() {
		e.res.Metrics[fmt.Sprintf("rss_mb_pid_%d", pid)] = round3(float64(b) / (1 << 20))
	}
}
