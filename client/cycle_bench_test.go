package client

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// BenchmarkMutexCycle runs Lock+Unlock cycles of 256 goroutines, each with
// its own session and 16 paths, through one client of 2 pooled connections
// to an in-process server that grants everything at once (no Raft): what
// the client library costs per cycle, in figures that hardly depend on the
// machine's load: process CPU per cycle (the trivial server included, the
// same in every run), allocations and write syscalls per cycle.
func BenchmarkMutexCycle(b *testing.B) {
	srv := newGrantServer(b)
	ctx := context.Background()
	c, err := New(ctx, []string{srv.addr()}, WithPoolSize(2), WithRequestTimeout(10*time.Second),
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
	r0 := srv.reads.Load()
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
	b.ReportMetric(float64(srv.reads.Load()-r0)/n, "client-writes/cycle") // one server read per client write, about
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// grantServer answers every request OK at once (an acquire with a token),
// batching its answers into one write per read, like the router.
type grantServer struct {
	ln     net.Listener
	wg     sync.WaitGroup
	reads  atomic.Int64 // reads that returned request bytes
	writes atomic.Int64
	token  atomic.Uint64
}

func newGrantServer(b *testing.B) *grantServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &grantServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var conns []net.Conn
		defer func() {
			for _, nc := range conns {
				nc.Close()
			}
		}()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, nc)
			s.wg.Add(1)
			go s.serve(nc)
		}
	}()
	b.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *grantServer) addr() string { return s.ln.Addr().String() }

// countingReader counts the reads that reach the socket.
type countingReader struct {
	nc net.Conn
	n  *atomic.Int64
}

func (r countingReader) Read(p []byte) (int, error) {
	r.n.Add(1)
	return r.nc.Read(p)
}

func (s *grantServer) serve(nc net.Conn) {
	defer s.wg.Done()
	defer nc.Close()
	br := bufio.NewReaderSize(countingReader{nc, &s.reads}, 64<<10)
	var in, out []byte
	var req wire.Request
	for {
		var err error
		in, err = wire.ReadFrame(br, wire.DefaultMaxFrame, in)
		if err != nil {
			return
		}
		req = wire.Request{}
		if err := wire.DecodeRequest(in, &req); err != nil {
			return
		}
		resp := wire.Response{ID: req.ID}
		if req.Op == wire.OpAcquire {
			resp.Token = s.token.Add(1)
		}
		out = wire.AppendResponseFrame(out, &resp)
		if br.Buffered() == 0 {
			s.writes.Add(1)
			if _, err := nc.Write(out); err != nil {
				return
			}
			out = out[:0]
		}
	}
}
