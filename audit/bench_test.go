package audit

import (
	"fmt"
	"sync"
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
// entry): what the store costs per event when entries come one or two at a
// time per shard. Run with a fixed count (-benchtime=1000x: each shard
// records that many entries, one every 2 ms); cpu-ns/event is the whole
// process, producers' pacing included (the same in every variant).
// The null variant paces the same producers without recording: subtract
// it.
func BenchmarkRecordShards(b *testing.B) {
	b.Run("store", func(b *testing.B) { benchRecordShards(b, true) })
	b.Run("null", func(b *testing.B) { benchRecordShards(b, false) })
}

func benchRecordShards(b *testing.B, record bool) {
	const shards, events, every = 16, 10, 2 * time.Millisecond
	s, err := Open(Options{Dir: b.TempDir(), SweepEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	var wg sync.WaitGroup
	for sh := uint64(1); sh <= shards; sh++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]wire.Event, events)
			for i := range batch {
				batch[i] = wire.Event{Kind: wire.EvAcquired, Cause: wire.CauseDirect, Path: fmt.Sprintf("/bench/u/%d", i),
					Owner: "worker", Lease: 1 << 40, Client: 77, Shard: sh, Time: time.Now().UnixMilli()}
			}
			tick := time.NewTicker(every)
			defer tick.Stop()
			rev := uint64(0)
			for i := 0; i < b.N; i++ {
				<-tick.C
				for j := range batch {
					rev++
					batch[j].Rev, batch[j].Token, batch[j].Seq = rev, rev, rev
				}
				if record {
					s.Record(sh, batch)
				}
			}
		}()
	}
	wg.Wait()
	s.Sync()
	b.StopTimer()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*shards*events), "cpu-ns/event")
	b.ReportMetric(float64(s.Written())/elapsed.Seconds(), "events-written/s")
	if v := s.values.Load(); v > 0 {
		b.ReportMetric(float64(s.valueEntries.Load())/float64(v), "entries/value")
	}
	if s.Dropped() != 0 {
		b.Fatalf("dropped %d", s.Dropped())
	}
}
