package client

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/wardenlock/warden/internal/tracectx"
	"github.com/wardenlock/warden/wire"
)

// TestTracerSpansAndPropagates: with WithTracer each call is one client
// span, a child of the caller's span, and every request carries that span's
// trace context (also a lock wait, which goes through park, and a try,
// which park hands to call: still one span).
func TestTracerSpansAndPropagates(t *testing.T) {
	srv := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		fc.answer(req, wire.Response{Token: 9, Lease: 4})
	})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	c := newTestClient(t, []string{srv.addr()}, WithTracer(tp.Tracer("test")))

	ctx, parent := tp.Tracer("app").Start(testContext(t), "app")
	if _, err := c.Put(ctx, "/kv/a", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "/locks/a", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "/locks/b", 10*time.Second, WithTry()); err != nil {
		t.Fatal(err)
	}
	parent.End()

	spans := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = append(spans[s.Name()], s)
	}
	if len(spans["kv.put"]) != 1 || len(spans["acquire"]) != 2 {
		t.Fatalf("spans = %v, want one kv.put and two acquire", spans)
	}
	sent := append(srv.requests(wire.OpKVPut), srv.requests(wire.OpAcquire)...)
	if len(sent) != 3 {
		t.Fatalf("server saw %d requests, want 3", len(sent))
	}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, name := range []string{"kv.put", "acquire"} {
		for _, s := range spans[name] {
			if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient {
				t.Errorf("%s: parent %v kind %v, want child of the caller's span, client kind", name, s.Parent().SpanID(), s.SpanKind())
			}
			byID[s.SpanContext().SpanID()] = s
		}
	}
	for _, r := range sent {
		sc := trace.SpanContextFromContext(tracectx.Extract(context.Background(), r.Trace))
		s, ok := byID[sc.SpanID()]
		if !ok || sc.TraceID() != parent.SpanContext().TraceID() || attr(s, "warden.path") != r.Path {
			t.Errorf("request %s %s carries %q: not its client span's context", r.Op, r.Path, r.Trace)
		}
	}
}

// TestNoTracerNoTraceField: without WithTracer no request carries a trace
// context, even when the caller's context has a span.
func TestNoTracerNoTraceField(t *testing.T) {
	srv := newFakeServer(t, okHandler)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	c := newTestClient(t, []string{srv.addr()})
	ctx, parent := tp.Tracer("app").Start(testContext(t), "app")
	if _, err := c.Put(ctx, "/kv/a", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "/locks/a", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	parent.End()
	sent := append(srv.requests(wire.OpKVPut), srv.requests(wire.OpAcquire)...)
	if len(sent) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(sent))
	}
	for _, r := range sent {
		if r.Trace != "" {
			t.Errorf("%s carries trace %q with tracing off", r.Op, r.Trace)
		}
	}
	if n := len(rec.Ended()); n != 1 {
		t.Errorf("%d spans ended, want only the caller's", n)
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}
