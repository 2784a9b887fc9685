package audit

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// cpuTime is the process's user+system CPU time: unlike wall time it
// hardly depends on what else runs on the machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRecord measures what the apply path pays per entry (Record) and,
// with Sync at the end, the writer's sustained rate and its CPU cost
// (cpu-ns/event: the whole process, writer and pebble's compactions
// included). One op = one applied entry of `events` lock events.
func BenchmarkRecord(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) { benchRecord(b, n) })
	}
}

func benchRecord(b *testing.B, n int) {
	s, err := Open(Options{Dir: b.TempDir(), Queue: 1 << 16, SweepEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := make([]wire.Event, n)
	for i := range batch {
		batch[i] = wire.Event{Kind: wire.EvAcquired, Cause: wire.CauseDirect, Path: fmt.Sprintf("/bench/u/%d", i),
			Owner: "worker", Token: uint64(i), Lease: 1 << 40, Client: 77, Seq: uint64(i), Shard: 2, Time: time.Now().UnixMilli()}
	}
	rev := uint64(0)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	var recordTime time.Duration
	for i := 0; i < b.N; i++ {
		for j := range batch {
			rev++
			batch[j].Rev = rev
			batch[j].Seq++
		}
		t := time.Now()
		s.Record(2, batch)
		recordTime += time.Since(t)
	}
	s.Sync()
	b.StopTimer()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.ReportMetric(float64(recordTime.Nanoseconds())/float64(b.N), "ns-record/entry")
	b.ReportMetric(float64(s.Written())/elapsed.Seconds(), "events-written/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/event")
	if s.Dropped() != 0 {
		b.Fatalf("dropped %d", s.Dropped())
	}
}
