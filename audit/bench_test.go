package audit

import (
	"fmt"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// BenchmarkRecord measures what the apply path pays per entry (Record: a
// copy and a channel send) and, with Sync at the end, the writer's
// sustained rate. One op = one entry of 64 lock events.
func BenchmarkRecord(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir(), Queue: 1 << 16, SweepEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := make([]wire.Event, 64)
	for i := range batch {
		batch[i] = wire.Event{Kind: wire.EvAcquired, Cause: wire.CauseDirect, Path: fmt.Sprintf("/locks/ns%d/job", i),
			Owner: "worker", Token: uint64(i), Lease: 1 << 40, Shard: 2, Time: time.Now().UnixMilli()}
	}
	rev := uint64(0)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var recordTime time.Duration
	for i := 0; i < b.N; i++ {
		for j := range batch {
			rev++
			batch[j].Rev = rev
		}
		t := time.Now()
		s.Record(2, batch)
		recordTime += time.Since(t)
	}
	s.Sync()
	b.StopTimer()
	elapsed := time.Since(start)
	b.ReportMetric(float64(recordTime.Nanoseconds())/float64(b.N), "ns-record/entry")
	b.ReportMetric(float64(s.Written())/elapsed.Seconds(), "events-written/s")
	if s.Dropped() != 0 {
		b.Logf("dropped %d", s.Dropped())
	}
}
