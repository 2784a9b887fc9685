package tracectx

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestRoundTrip(t *testing.T) {
	ts, err := trace.ParseTraceState("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 1, 2, 3},
		SpanID:     trace.SpanID{0, 0xf0, 0x67, 1},
		TraceFlags: trace.FlagsSampled,
		TraceState: ts,
	})
	s := Inject(trace.ContextWithSpanContext(context.Background(), sc))
	if !strings.HasPrefix(s, "00-4bf90102030000000000000000000000-00f0670100000000-01;") {
		t.Fatalf("Inject = %q", s)
	}
	got := trace.SpanContextFromContext(Extract(context.Background(), s))
	if !got.IsRemote() || got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() ||
		!got.IsSampled() || got.TraceState().String() != ts.String() {
		t.Fatalf("Extract(%q) = %+v, want %+v", s, got, sc)
	}
}

func TestNoSpanNoContext(t *testing.T) {
	if s := Inject(context.Background()); s != "" {
		t.Fatalf("Inject without a span = %q", s)
	}
	for _, bad := range []string{"", "garbage", "00-zz-yy-01", ";"} {
		if sc := trace.SpanContextFromContext(Extract(context.Background(), bad)); sc.IsValid() {
			t.Fatalf("Extract(%q) gave a valid span context %v", bad, sc)
		}
	}
}
