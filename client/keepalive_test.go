package client

import (
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
		if req.Op == wire.OpKeepAlive {
			mu.Lock()
			frames = append(frames, append([]uint64(nil), req.Leases...))
			mu.Unlock()
		}
		fc.answer(req, wire.Response{})
	})
	c := newTestClient(t, []string{srv.addr()})
	var outs []chan keepAliveResult
	for lease := uint64(1); lease <= 50; lease++ {
		outs = append(outs, c.keepAlives.submit(lease, time.Now(), make(chan keepAliveResult, 1)))
	}
	for _, out := range outs {
		if r := <-out; r.err != nil || r.gone {
			t.Fatalf("keepalive result %+v", r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, f := range frames {
		total += len(f)
	}
	if total != 50 || len(frames) > 2 {
		t.Fatalf("50 keepalives went out as %d frames carrying %d leases", len(frames), total)
	}
}

func TestKeepAliveOutcomeIsPerLease(t *testing.T) {
	resp := &wire.Response{Leases: []uint64{7}}
	if r := keepAliveOutcome(keepAliveWaiter{lease: 7}, resp, nil); !r.gone {
		t.Fatal("lease 7 is reported gone")
	}
	if r := keepAliveOutcome(keepAliveWaiter{lease: 8}, resp, nil); r.gone || r.err != nil {
		t.Fatalf("lease 8 is alive: %+v", r)
	}
	failed := &wire.Response{Code: wire.Unavailable, Leases: []uint64{9}}
	if r := keepAliveOutcome(keepAliveWaiter{lease: 9}, failed, wire.ErrUnavailable); !r.gone {
		t.Fatal("a lease reported gone settles its session even when another shard failed")
	}
	if r := keepAliveOutcome(keepAliveWaiter{lease: 10}, failed, wire.ErrUnavailable); r.gone || r.err == nil {
		t.Fatalf("an alive lease in a failed answer is a failure, not gone: %+v", r)
	}
}
