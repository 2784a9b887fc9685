package shard

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/wardenlock/warden/internal/tracectx"
	"github.com/wardenlock/warden/wire"
)

type tracerBox struct{ t trace.Tracer }

var tracerHold atomic.Pointer[tracerBox]

// SetTracer turns shard spans on for every shard in the process, or off with
// nil. A span is made only for a request that carries a trace context
// (wire.Request.Trace, set by a tracing router): one per proposed request,
// from its submission to the proposer through commit and apply to its
// answer, and one per read. Requests without a trace context cost one string
// comparison; with tracing off, one atomic load more.
func SetTracer(t trace.Tracer) {
	if t == nil {
		tracerHold.Store(nil)
		return
	}
	tracerHold.Store(&tracerBox{t})
}

// traceSpan starts the span of req on this shard (kind says which:
// "apply" or "read") when req carries a trace context and tracing is on; it
// returns nil otherwise.
func (s *Shard) traceSpan(kind string, req *wire.Request) trace.Span {
	if req.Trace == "" {
		return nil
	}
	tb := tracerHold.Load()
	if tb == nil {
		return nil
	}
	_, span := tb.t.Start(tracectx.Extract(context.Background(), req.Trace), "shard."+kind+" "+req.Op.String(),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("warden.op", req.Op.String()), attribute.String("warden.path", req.Path),
			attribute.Int64("warden.shard", int64(s.id)), attribute.Int64("warden.node", int64(s.replicaID))))
	return span
}

// endSpan closes span with resp's outcome.
func endSpan(span trace.Span, resp *wire.Response) {
	span.SetAttributes(attribute.String("warden.code", resp.Code.String()))
	if resp.Token != 0 {
		span.SetAttributes(attribute.Int64("warden.token", int64(resp.Token)))
	}
	if resp.Code != wire.OK && resp.Code != wire.Queued {
		span.SetStatus(codes.Error, resp.Msg)
	}
	span.End()
}

// spanDone closes span with the answer's outcome and then calls done.
func spanDone(span trace.Span, done func(*wire.Response)) func(*wire.Response) {
	return func(resp *wire.Response) {
		endSpan(span, resp)
		done(resp)
	}
}

// untraced is req without its trace context, for the Raft log: a trace is
// no part of the replicated operation. It copies only a traced request.
func untraced(req *wire.Request) *wire.Request {
	if req.Trace == "" {
		return req
	}
	c := *req
	c.Trace = ""
	return &c
}
