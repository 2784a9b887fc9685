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

// BenchmarkRecordShards is many shards applying small entries at a steady
// pace, as at 16 shards in a cluster (about 5 operations, 10 events, per
// entry, every 2 ms per shard: 80k events/s): what the store costs per
// event when each shard gives it one entry at a time. One producer records
// an entry of every shard each tick (fewer timer wake-ups than a goroutine
// per shard, so less noise). cpu-ns/event is the whole process, the
// producer's pacing included: subtract the null variant (no store calls).
// The linger variants show what gathering a shard's entries into one value
// saves (entries/value). Run with a fixed count: -benchtime=2000x.
func BenchmarkRecordShards(b *testing.B) {
	b.Run("null", func(b *testing.B) { benchRecordShards(b, false, 0) })
	b.Run("linger=none", func(b *testing.B) { benchRecordShards(b, true, -1) })
	b.Run("linger=10ms", func(b *testing.B) { benchRecordShards(b, true, 10*time.Millisecond) })
}

func benchRecordShards(b *testing.B, record bool, linger time.Duration) {
	const shards, events, every = 16, 10, 2 * time.Millisecond
	s, err := Open(Options{Dir: b.TempDir(), SweepEvery: time.Hour, Linger: linger})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batches := make([][]wire.Event, shards+1)
	for sh := uint64(1); sh <= shards; sh++ {
		batches[sh] = make([]wire.Event, events)
		for i := range batches[sh] {
			batches[sh][i] = wire.Event{Kind: wire.EvAcquired, Cause: wire.CauseDirect, Path: fmt.Sprintf("/bench/u/%d", i),
				Owner: "worker", Lease: 1 << 40, Client: 77, Shard: sh, Time: time.Now().UnixMilli()}
		}
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	rev := uint64(0)
	for i := 0; i < b.N; i++ {
		<-tick.C
		for sh := uint64(1); sh <= shards; sh++ {
			batch := batches[sh]
			for j := range batch {
				batch[j].Rev, batch[j].Token, batch[j].Seq = rev+uint64(j)+1, rev+uint64(j)+1, rev+uint64(j)+1
			}
			if record {
				s.Record(sh, batch)
			}
		}
		rev += events
	}
	s.Sync()
	b.StopTimer()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*shards*events), "cpu-ns/event")
	b.ReportMetric(float64(s.Written())/elapsed.Seconds(), "events-written/s")
	if v, e := s.Values(); v > 0 {
		b.ReportMetric(float64(e)/float64(v), "entries/value")
	}
	if s.Dropped() != 0 {
		b.Fatalf("dropped %d", s.Dropped())
	}
}
