package raftwal

import (
	"sync/atomic"
	"time"

	"github.com/wardenlock/warden/internal/diskfs"
)

// SyncBuckets are the upper bounds, in seconds, of Stats' histogram of
// segment fdatasync durations: 100 µs (a quiet local disk) to 250 ms.
var SyncBuckets = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25}

// RotationBuckets are the upper bounds, in seconds, of Stats' histogram of
// rotations (the time every writer of the node waits while the store
// starts a segment): 1 ms to 5 s.
var RotationBuckets = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// Stats counts a store's fdatasyncs of segments (the ones a write waits
// for; the spare filler's are not counted) and how long they took, and
// its rotations: how long each held the store, and the live entries they
// copied forward. It is safe for concurrent use; a node's metrics and
// status read it (Snapshot, Rotations).
type Stats struct {
	count   atomic.Uint64
	nanos   atomic.Uint64
	buckets [len(SyncBuckets) + 1]atomic.Uint64 // per bucket, the last one past every bound

	rotations      atomic.Uint64
	rotationNanos  atomic.Uint64
	rotationMax    atomic.Uint64 // nanoseconds
	rotBuckets     [len(RotationBuckets) + 1]atomic.Uint64
	copiedBytes    atomic.Uint64
	copiedReplicas atomic.Uint64
}

// RotationStats is what Stats.Rotations returns.
type RotationStats struct {
	// Count is the number of segments started after the first.
	Count uint64
	// Seconds is their total duration, MaxSeconds the longest.
	Seconds, MaxSeconds float64
	// Cumulative: per bound of RotationBuckets, how many took at most that.
	Cumulative [len(RotationBuckets)]uint64
	// CopiedBytes and CopiedReplicas: live entries copied into new
	// segments' checkpoints, and how many replicas' (once per rotation).
	CopiedBytes, CopiedReplicas uint64
}

func (s *Stats) observeRotation(d time.Duration, copiedBytes, copiedReplicas uint64) {
	s.rotations.Add(1)
	s.rotationNanos.Add(uint64(d))
	for {
		m := s.rotationMax.Load()
		if uint64(d) <= m || s.rotationMax.CompareAndSwap(m, uint64(d)) {
			break
		}
	}
	s.rotBuckets[bucketOf(RotationBuckets[:], d)].Add(1)
	s.copiedBytes.Add(copiedBytes)
	s.copiedReplicas.Add(copiedReplicas)
}

// Rotations returns the rotation counters.
func (s *Stats) Rotations() RotationStats {
	r := RotationStats{
		Count:          s.rotations.Load(),
		Seconds:        time.Duration(s.rotationNanos.Load()).Seconds(),
		MaxSeconds:     time.Duration(s.rotationMax.Load()).Seconds(),
		CopiedBytes:    s.copiedBytes.Load(),
		CopiedReplicas: s.copiedReplicas.Load(),
	}
	cumulate(s.rotBuckets[:len(RotationBuckets)], r.Cumulative[:])
	return r
}

func (s *Stats) observe(d time.Duration) {
	s.count.Add(1)
	s.nanos.Add(uint64(d))
	s.buckets[bucketOf(SyncBuckets[:], d)].Add(1)
}

// bucketOf is the index of the first bound (seconds) d is at most, or
// len(bounds) past every bound.
func bucketOf(bounds []float64, d time.Duration) int {
	sec := d.Seconds()
	i := 0
	for i < len(bounds) && sec > bounds[i] {
		i++
	}
	return i
}

// cumulate writes into out the running totals of counts (the last bucket,
// past every bound, is not part of it).
func cumulate(counts []atomic.Uint64, out []uint64) {
	var run uint64
	for i := range out {
		run += counts[i].Load()
		out[i] = run
	}
}

// Snapshot returns the number of syncs, their total duration in seconds,
// and per bound of SyncBuckets how many took at most that (cumulative).
func (s *Stats) Snapshot() (count uint64, seconds float64, cumulative [len(SyncBuckets)]uint64) {
	cumulate(s.buckets[:len(SyncBuckets)], cumulative[:])
	return s.count.Load(), time.Duration(s.nanos.Load()).Seconds(), cumulative
}

// syncSegment fdatasyncs a segment file, counted in Syncs and Stats.
func (w *WAL) syncSegment(f diskfs.File) error {
	t0 := time.Now()
	err := f.SyncData()
	w.stats.observe(time.Since(t0))
	w.Syncs.Add(1)
	return err
}
