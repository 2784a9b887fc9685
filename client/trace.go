package client

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/wardenlock/warden/internal/tracectx"
	"github.com/wardenlock/warden/wire"
)

// startSpan starts the client span of one call (only with WithTracer) and
// puts its trace context in req, so every attempt carries it. The
// attributes are the router's: op and path, then code and token.
func (c *Client) startSpan(ctx context.Context, req *wire.Request) (context.Context, trace.Span) {
	ctx, span := c.cfg.tracer.Start(ctx, req.Op.String(), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("warden.op", req.Op.String()), attribute.String("warden.path", req.Path)))
	req.Trace = tracectx.Inject(ctx)
	return ctx, span
}

func endSpan(span trace.Span, resp *wire.Response, err error) {
	if resp != nil {
		span.SetAttributes(attribute.String("warden.code", resp.Code.String()))
		if resp.Token != 0 {
			span.SetAttributes(attribute.Int64("warden.token", int64(resp.Token)))
		}
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
