package router

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/wardenlock/warden/internal/tracectx"
	"github.com/wardenlock/warden/wire"
)

// Hooks observe the requests a router answers; metrics hang on them. They
// run on the request path: cheap, never blocking.
type Hooks struct {
	// Request is called once per answered client request (not for requests
	// another node forwarded here, which its own router counts) with the
	// time from arrival to answer. A blocking acquire's time includes its wait.
	Request func(op wire.Op, code wire.Code, elapsed time.Duration)
	// SlowConsumer is called when a watch is cut off because its client
	// reads too slowly.
	SlowConsumer func()
}

// Hooks are kept beside the Server, not in it, so a router without them
// pays one atomic load per request.
var (
	hookTable  sync.Map // *Server → *Hooks
	hookedSrvs atomic.Int32
	tracerHold atomic.Pointer[tracerBox]
)

type tracerBox struct{ t trace.Tracer }

// SetHooks installs (or, with nil, removes) this router's hooks.
func (s *Server) SetHooks(h *Hooks) {
	if h == nil {
		if _, had := hookTable.LoadAndDelete(s); had {
			hookedSrvs.Add(-1)
		}
		return
	}
	if _, had := hookTable.Swap(s, h); !had {
		hookedSrvs.Add(1)
	}
}

// SetTracer turns request tracing on for every router in the process (one
// server span per client request, a child of the client's span when the
// request carries its trace context; a forwarded request gets a span on the
// receiving node too, a child of the forwarding node's), or off with nil.
// Off costs one atomic load per request and adds nothing to requests.
func SetTracer(t trace.Tracer) {
	if t == nil {
		tracerHold.Store(nil)
		return
	}
	tracerHold.Store(&tracerBox{t})
}

// tracked is one request under observation, from arrival to answer. It is
// a value so the request's call carries it without another allocation.
type tracked struct {
	hooks *Hooks
	start time.Duration // monoNow at arrival
	span  trace.Span
}

func (s *Server) track(req *wire.Request, peer bool) tracked {
	var t tracked
	if !peer && hookedSrvs.Load() != 0 {
		if v, ok := hookTable.Load(s); ok {
			t.hooks, t.start = v.(*Hooks), monoNow()
		}
	}
	// A forwarded request gets a span only when the forwarding router
	// traced it (it then carries that router's span context).
	if tb := tracerHold.Load(); tb != nil && (!peer || req.Trace != "") {
		t.span = s.startSpan(tb.t, req)
	}
	return t
}

// startSpan starts the server span of req, a child of the caller's span when
// req carries one, and puts the span's own context in req.Trace so the hops
// after this one (a peer node, the shard) make their spans its children.
// A span the sampler dropped passes nothing on: the later hops would drop
// theirs too (parent-based sampling), so they are spared the work, and the
// request goes on as an untraced one.
func (s *Server) startSpan(tr trace.Tracer, req *wire.Request) trace.Span {
	attrs := []attribute.KeyValue{attribute.String("warden.op", req.Op.String()), attribute.String("warden.path", req.Path)}
	if h := s.cfg.Host; h != nil {
		attrs = append(attrs, attribute.Int64("warden.node", int64(h.NodeID())))
	}
	ctx, span := tr.Start(tracectx.Extract(context.Background(), req.Trace), req.Op.String(),
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	req.Trace = ""
	if span.SpanContext().IsSampled() {
		req.Trace = tracectx.Inject(ctx)
	}
	return span
}

func (t tracked) done(req *wire.Request, resp *wire.Response) {
	if t.hooks != nil && t.hooks.Request != nil {
		t.hooks.Request(req.Op, resp.Code, monoNow()-t.start)
	}
	if t.span != nil {
		t.span.SetAttributes(attribute.String("warden.code", resp.Code.String()))
		if resp.Token != 0 {
			t.span.SetAttributes(attribute.Int64("warden.token", int64(resp.Token)))
		}
		if resp.Code != wire.OK && resp.Code != wire.Queued {
			t.span.SetStatus(codes.Error, resp.Msg)
		}
		t.span.End()
	}
}

// slowConsumer reports a watch cut off for reading too slowly.
func (s *Server) slowConsumer() {
	if hookedSrvs.Load() == 0 {
		return
	}
	if v, ok := hookTable.Load(s); ok && v.(*Hooks).SlowConsumer != nil {
		v.(*Hooks).SlowConsumer()
	}
}
