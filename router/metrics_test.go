package router

import (
	"testing"

	"github.com/wardenlock/warden/wire"
)

// BenchmarkTrackOff is what observation costs a request when no hooks are
// installed and tracing is off: it must stay at a few nanoseconds, no
// allocations.
func BenchmarkTrackOff(b *testing.B) {
	s := &Server{}
	req := &wire.Request{Op: wire.OpAcquire, Path: "/a/b"}
	resp := &wire.Response{}
	b.ReportAllocs()
	for b.Loop() {
		t := s.track(req, false)
		t.done(req, resp)
	}
}

// TestTrackOffAllocatesNothing: with no hooks and tracing off, observing a
// request (a client's or a forwarded one) allocates nothing and adds no
// trace context to it.
func TestTrackOffAllocatesNothing(t *testing.T) {
	SetTracer(nil)
	s := &Server{}
	req := &wire.Request{Op: wire.OpAcquire, Path: "/a/b"}
	resp := &wire.Response{}
	for _, peer := range []bool{false, true} {
		if n := testing.AllocsPerRun(1000, func() {
			t := s.track(req, peer)
			t.done(req, resp)
		}); n != 0 {
			t.Errorf("peer=%v: %v allocations per request with tracing off, want 0", peer, n)
		}
	}
	if req.Trace != "" {
		t.Errorf("tracing off put %q in the request", req.Trace)
	}
}
