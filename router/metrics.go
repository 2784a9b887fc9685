package router

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

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
// server span per client request), or off with nil. Off costs one atomic
// load per request.
func SetTracer(t trace.Tracer) {
	if t == nil {
		tracerHold.Store(nil)
		return
	}
	tracerHold.Store(&tracerBox{t})
}

// tracked is one request under observation, from arrival to answer. It is
// a value so the answer closure carries it without another allocation.
type tracked struct {
	hooks *Hooks
	start time.Time
	span  trace.Span
}

func (s *Server) track(req *wire.Request, peer bool) tracked {
	var t tracked
	if peer {
		return t
	}
	if hookedSrvs.Load() != 0 {
		if v, ok := hookTable.Load(s); ok {
			t.hooks, t.start = v.(*Hooks), time.Now()
		}
	}
	if tb := tracerHold.Load(); tb != nil {
		_, t.span = tb.t.Start(context.Background(), req.Op.String(), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("warden.op", req.Op.String()), attribute.String("warden.path", req.Path)))
	}
	return t
}

func (t tracked) done(req *wire.Request, resp *wire.Response) {
	if t.hooks != nil && t.hooks.Request != nil {
		t.hooks.Request(req.Op, resp.Code, time.Since(t.start))
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
