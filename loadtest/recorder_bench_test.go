package loadtest

import (
	"testing"
	"time"
)

// BenchmarkRecorderCycle records what one closed-loop lock cycle records
// (acquire, release and cycle latencies, one worker): the recorder's own
// cost per cycle in the load generator.
func BenchmarkRecorderCycle(b *testing.B) {
	start := time.Now()
	r := newRun("cycle", start, genericCode)
	rec := r.recorder()
	t0 := start
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		t1 := t0.Add(time.Millisecond)
		t2 := t1.Add(time.Millisecond)
		rec.ObserveAt("acquire", t0, t1, nil)
		rec.ObserveAt("release", t1, t2, nil)
		rec.ObserveAt("cycle", t0, t2, nil)
		t0 = t2.Add(-time.Millisecond) // about 2,000 cycles per recorded second
	}
	rec.Flush()
}
