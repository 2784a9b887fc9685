package raftwal

import (
	"os"
	"sync/atomic"
	"time"
)

// SyncBuckets are the upper bounds, in seconds, of Stats' histogram of
// segment fdatasync durations: 100 µs (a quiet local disk) to 250 ms.
var SyncBuckets = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25}

// Stats counts a store's fdatasyncs of segments (the ones a write waits
// for; the spare filler's are not counted) and how long they took. It is
// safe for concurrent use; a node's metrics read it (Snapshot).
type Stats struct {
	count   atomic.Uint64
	nanos   atomic.Uint64
	buckets [len(SyncBuckets) + 1]atomic.Uint64 // per bucket, the last one past every bound
}

func (s *Stats) observe(d time.Duration) {
	s.count.Add(1)
	s.nanos.Add(uint64(d))
	sec := d.Seconds()
	i := 0
	for i < len(SyncBuckets) && sec > SyncBuckets[i] {
		i++
	}
	s.buckets[i].Add(1)
}

// Snapshot returns the number of syncs, their total duration in seconds,
// and per bound of SyncBuckets how many took at most that (cumulative).
func (s *Stats) Snapshot() (count uint64, seconds float64, cumulative [len(SyncBuckets)]uint64) {
	var run uint64
	for i := range cumulative {
		run += s.buckets[i].Load()
		cumulative[i] = run
	}
	return s.count.Load(), time.Duration(s.nanos.Load()).Seconds(), cumulative
}

// syncSegment fdatasyncs a segment file, counted in Syncs and Stats.
func (w *WAL) syncSegment(f *os.File) error {
	t0 := time.Now()
	err := fdatasync(f)
	w.stats.observe(time.Since(t0))
	w.Syncs.Add(1)
	return err
}
