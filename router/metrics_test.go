package router

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

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

// TestTrackPropagatesSampledSpans: a traced request leaves the router with
// the router span's context (a child of the caller's); one the sampler
// dropped leaves with none, so later hops do no tracing work for it.
func TestTrackPropagatesSampledSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	defer tp.Shutdown(context.Background())
	SetTracer(tp.Tracer("test"))
	defer SetTracer(nil)
	s := &Server{}
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

	sampled := &wire.Request{Op: wire.OpAcquire, Path: "/a", Trace: parent}
	s.track(sampled, false).done(sampled, &wire.Response{})
	got := rec.Ended()
	if len(got) != 1 || got[0].Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("spans %v: want one child of the caller's span", got)
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + got[0].SpanContext().SpanID().String() + "-01"
	if sampled.Trace != want {
		t.Errorf("request leaves with %q, want the router span's context %q", sampled.Trace, want)
	}

	for _, tc := range []struct {
		peer  bool
		trace string
	}{
		{false, ""}, // a root the sampler drops
		{false, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}, // the caller did not sample
		{true, ""}, // forwarded by a router that did not trace it
	} {
		req := &wire.Request{Op: wire.OpAcquire, Path: "/a", Trace: tc.trace}
		s.track(req, tc.peer).done(req, &wire.Response{})
		if req.Trace != "" {
			t.Errorf("peer=%v trace=%q: request leaves with %q, want none", tc.peer, tc.trace, req.Trace)
		}
	}
	if n := len(rec.Ended()); n != 1 {
		t.Errorf("%d spans recorded, want only the sampled one", n)
	}
}
