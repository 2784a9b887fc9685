package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wardenlock/warden/internal/grantserver"
)

// BenchmarkMutexCycle runs Lock+Unlock cycles of 256 goroutines, each with
// its own session and 16 paths, through one client of 2 pooled connections
// to an in-process server that grants everything at once (no Raft): what
// the client library costs per cycle, in figures that hardly depend on the
// machine's load: process CPU per cycle (the trivial server included, the
// same in every run), allocations and write syscalls per cycle.
func BenchmarkMutexCycle(b *testing.B) {
	srv := grantserver.Start(b)
	ctx := context.Background()
	c, err := New(ctx, []string{srv.Addr()}, WithPoolSize(2), WithRequestTimeout(10*time.Second),
		WithoutDirectRouting())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const workers = 256
	mus := make([][]*Mutex, workers)
	for w := range mus {
		s, err := c.NewSession(ctx, WithTTL(time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close(ctx)
		for i := 0; i < 16; i++ {
			mus[w] = append(mus[w], NewMutex(s, fmt.Sprintf("/bench/w%d-%d/lock", w, i)))
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	r0 := srv.Reads.Load()
	cpu0 := processCPU()
	b.ReportAllocs()
	b.ResetTimer()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; next.Add(1) <= int64(b.N); i++ {
				m := mus[w][i%16]
				if err := m.Lock(ctx); err != nil {
					b.Error(err)
					return
				}
				if err := m.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/n, "cpu-µs/cycle")
	b.ReportMetric(float64(srv.Reads.Load()-r0)/n, "client-writes/cycle") // one server read per client write, about
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
