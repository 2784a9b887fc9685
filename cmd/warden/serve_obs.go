package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/shard"
)

// obsFlags are serve's observability flags. Tracing is off unless
// --otlp-endpoint is given; off, the router pays one atomic load per request
// and the shard one string comparison (no request carries a trace context).
type obsFlags struct {
	endpoint string
	ratio    float64
}

// withObservability adds the flags to cmd and starts tracing around its RunE.
func withObservability(cmd *cobra.Command) {
	o := &obsFlags{}
	cmd.Flags().StringVar(&o.endpoint, "otlp-endpoint", "", "send OTLP traces over HTTP to host:port or a collector URL (empty: tracing off)")
	cmd.Flags().Float64Var(&o.ratio, "trace-ratio", 0.01, "fraction of requests traced when --otlp-endpoint is set")
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		stop, err := o.startTracing()
		if err != nil {
			return &exitError{code: exitFailure, err: err}
		}
		defer stop()
		return run(cmd, args)
	}
}

func (o *obsFlags) startTracing() (stop func(), err error) {
	if o.endpoint == "" {
		return func() {}, nil
	}
	opt := otlptracehttp.WithEndpoint(o.endpoint)
	if strings.Contains(o.endpoint, "://") {
		u, err := url.Parse(o.endpoint)
		if err != nil {
			return nil, fmt.Errorf("--otlp-endpoint: %w", err)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces" // a collector's base URL, as operators usually give it
		}
		opt = otlptracehttp.WithEndpointURL(u.String())
	}
	opts := []otlptracehttp.Option{opt}
	if !strings.HasPrefix(o.endpoint, "https://") {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "warden"))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.ratio))),
		sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	router.SetTracer(tp.Tracer("github.com/wardenlock/warden/router"))
	shard.SetTracer(tp.Tracer("github.com/wardenlock/warden/shard"))
	return func() {
		router.SetTracer(nil)
		shard.SetTracer(nil)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tp.Shutdown(ctx)
	}, nil
}
