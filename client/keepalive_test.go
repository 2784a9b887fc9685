package client

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Sessions whose keepalives fall due together share one frame, and each
// hears only about its own lease.
func TestKeepAlivesOfManySessionsShareFrames(t *testing.T) {
	var mu sync.Mutex
	var frames [][]uint64
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		if req.Op == wire.OpKeepAlive && len(req.Leases) > 0 {
			mu.Lock()
			frames = append(frames, append([]uint64(nil), req.Leases...))
			mu.Unlock()
		}
		fc.answer(req, wire.Response{})
	})
	clk := newFakeClock()
	c := newTestClient(t, []string{srv.addr()}, withClock(clk))
	const ttl = 9 * time.Second
	var sessions []*Session
	for range 50 {
		s, err := c.NewSession(testContext(t), WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	eventually(t, "the scheduler's timer", func() bool { return clk.pending() == 1 })
	clk.Advance(ttl / 3)
	eventually(t, "50 keepalives", func() bool {
		mu.Lock()
		defer mu.Unlock()
		total := 0
		for _, f := range frames {
			total += len(f)
		}
		return total == 50
	})
	mu.Lock()
	if len(frames) != 1 {
		t.Errorf("50 keepalives due together went out as %d frames", len(frames))
	}
	mu.Unlock()
	for _, s := range sessions {
		if s.Err() != nil {
			t.Fatalf("session %x: %v", s.Lease(), s.Err())
		}
	}
}

// A client keeps its sessions alive from one goroutine and one timer, not
// a goroutine (and two timers) per session.
func TestSessionsShareOneScheduler(t *testing.T) {
	script := &keepAliveScript{}
	srv := newFakeServer(t, script.handle)
	clk := newFakeClock()
	c := newTestClient(t, []string{srv.addr()}, withClock(clk))
	before := runtime.NumGoroutine()
	for range 200 {
		if _, err := c.NewSession(testContext(t), WithTTL(9*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if grew := runtime.NumGoroutine() - before; grew > 20 {
		t.Errorf("200 sessions added %d goroutines", grew)
	}
	eventually(t, "one timer", func() bool { return clk.pending() == 1 })
}

func TestKeepAliveOutcomeIsPerLease(t *testing.T) {
	resp := &wire.Response{Leases: []uint64{7}}
	if r := keepAliveOutcome(7, resp, nil); !r.gone {
		t.Fatal("lease 7 is reported gone")
	}
	if r := keepAliveOutcome(8, resp, nil); r.gone || r.err != nil {
		t.Fatalf("lease 8 is alive: %+v", r)
	}
	failed := &wire.Response{Code: wire.Unavailable, Leases: []uint64{9}}
	if r := keepAliveOutcome(9, failed, wire.ErrUnavailable); !r.gone {
		t.Fatal("a lease reported gone settles its session even when another shard failed")
	}
	if r := keepAliveOutcome(10, failed, wire.ErrUnavailable); r.gone || r.err == nil {
		t.Fatalf("an alive lease in a failed answer is a failure, not gone: %+v", r)
	}
}
