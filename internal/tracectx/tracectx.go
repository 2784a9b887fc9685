// Package tracectx carries a W3C trace context in wire.Request.Trace:
// "traceparent" or "traceparent;tracestate". The client, the router and the
// shard use it so their spans form one trace across the hops.
package tracectx

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

const (
	parentKey = "traceparent"
	stateKey  = "tracestate"
)

// carrier is a propagation.TextMapCarrier over the two W3C headers.
type carrier struct{ parent, state string }

func (c *carrier) Get(key string) string {
	switch key {
	case parentKey:
		return c.parent
	case stateKey:
		return c.state
	}
	return ""
}

func (c *carrier) Set(key, value string) {
	switch key {
	case parentKey:
		c.parent = value
	case stateKey:
		c.state = value
	}
}

func (c *carrier) Keys() []string { return []string{parentKey, stateKey} }

var prop propagation.TraceContext

// Inject returns the trace context of ctx's span in Request.Trace form, or ""
// when ctx has no valid span context.
func Inject(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	var c carrier
	prop.Inject(ctx, &c)
	if c.parent == "" {
		return ""
	}
	if c.state != "" {
		return c.parent + ";" + c.state
	}
	return c.parent
}

// Extract returns ctx carrying the remote span context in s (Request.Trace
// form). A malformed or empty s leaves ctx unchanged: the next span is a
// root, never an error.
func Extract(ctx context.Context, s string) context.Context {
	if s == "" {
		return ctx
	}
	c := carrier{parent: s}
	if i := strings.IndexByte(s, ';'); i >= 0 {
		c.parent, c.state = s[:i], s[i+1:]
	}
	return prop.Extract(ctx, &c)
}
