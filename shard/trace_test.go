package shard

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/wardenlock/warden/wire"
)

// TestUntracedRequestCostsNothing: a request without a trace context makes
// no span even with tracing on, and reaches the log as it is (no copy, no
// allocation); a traced one is copied without its context.
func TestUntracedRequestCostsNothing(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	SetTracer(tp.Tracer("test"))
	defer SetTracer(nil)
	s := &Shard{id: 3, replicaID: 2}
	req := &wire.Request{Op: wire.OpAcquire, Path: "/a"}
	if n := testing.AllocsPerRun(1000, func() {
		if s.traceSpan("apply", req) != nil || untraced(req) != req {
			t.Fatal("an untraced request was traced or copied")
		}
	}); n != 0 {
		t.Errorf("%v allocations for an untraced request, want 0", n)
	}

	traced := &wire.Request{Op: wire.OpAcquire, Path: "/a", Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	span := s.traceSpan("apply", traced)
	if span == nil {
		t.Fatal("no span for a traced request with tracing on")
	}
	endSpan(span, &wire.Response{Token: 5})
	got := rec.Ended()
	if len(got) != 1 || got[0].Parent().SpanID().String() != "00f067aa0ba902b7" || got[0].Name() != "shard.apply acquire" {
		t.Fatalf("spans = %v, want one shard.apply acquire child of 00f067aa0ba902b7", got)
	}
	if c := untraced(traced); c == traced || c.Trace != "" || traced.Trace == "" || c.Path != "/a" {
		t.Errorf("untraced(traced) = %+v: want a copy without the context, the original kept", c)
	}
	SetTracer(nil)
	if s.traceSpan("apply", traced) != nil {
		t.Error("a span with tracing off")
	}
}
