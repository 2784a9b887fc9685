package loadtest

import (
	"context"
	"time"
)

// Open-loop scheduling: operation i (from 0) is due at start + i/rate. Its
// latency is measured from that intended time, not from when a worker got
// round to sending it, so a stalled server is charged for every operation it
// delayed (no coordinated omission).

// intendedAt is the due time of operation i at rate operations per second.
func intendedAt(start time.Time, rate float64, i int64) time.Time {
	return start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
}

// dueBy is how many operations are due by elapsed time at rate per second
// (operation 0 is due at once).
func dueBy(elapsed time.Duration, rate float64) int64 {
	if elapsed < 0 {
		return 0
	}
	return int64(elapsed.Seconds()*rate) + 1
}

// openLoopLatency is the latency charged to an operation due at intended that
// completed at done.
func openLoopLatency(intended, done time.Time) time.Duration {
	if d := done.Sub(intended); d > 0 {
		return d
	}
	return 0
}

// pacer puts one open-loop worker to sleep until its next operation is due.
// It keeps one timer for all its waits: a timer per operation was the
// generator's largest allocation at high rates.
type pacer struct{ t *time.Timer }

// sleepUntil waits until t; it reports false if ctx ended first.
func (p *pacer) sleepUntil(ctx context.Context, t time.Time) bool {
	wait := time.Until(t)
	if wait <= 0 {
		return ctx.Err() == nil
	}
	if p.t == nil {
		p.t = time.NewTimer(wait)
	} else {
		p.t.Reset(wait) // since Go 1.23 a reset timer delivers nothing stale
	}
	select {
	case <-p.t.C:
		return true
	case <-ctx.Done():
		p.t.Stop()
		return false
	}
}
