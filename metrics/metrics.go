package metrics

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/wardenlock/warden/internal/buildinfo"
	"github.com/wardenlock/warden/router"
)

// Config says what one node's metrics observe.
type Config struct {
	Node   Node   // the node's replicas; nil for a standalone router
	Router Router // its router; nil: no request metrics
	// Version is reported by warden_build_info (default: the build's,
	// internal/buildinfo).
	Version string
	// Audit is the node's audit store (nil: no audit metrics).
	Audit Audit
}

// Metrics is one node's meter provider, instruments and Prometheus registry.
// Each node has its own, so several nodes in one process (tests, `warden
// dev`) never mix their numbers.
type Metrics struct {
	cfg      Config
	reg      *prometheus.Registry
	provider *sdkmetric.MeterProvider
	meter    metric.Meter

	req    *requestMetrics
	shards *shardMetrics
}

// New builds the instruments and starts observing cfg.Node and cfg.Router.
// Close stops observing.
func New(cfg Config) (*Metrics, error) {
	if cfg.Version == "" {
		cfg.Version = buildinfo.Get().Version
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("metrics: prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	m := &Metrics{cfg: cfg, reg: reg, provider: provider, meter: provider.Meter("github.com/wardenlock/warden")}
	if err := m.buildInfo(); err != nil {
		return nil, err
	}
	if cfg.Router != nil {
		if m.req, err = newRequestMetrics(m.meter); err != nil {
			return nil, err
		}
		cfg.Router.SetHooks(&router.Hooks{Request: m.req.observe, SlowConsumer: m.req.slowConsumer})
		if err := m.routerMetrics(cfg.Router); err != nil {
			return nil, err
		}
	}
	if cfg.Node != nil {
		if m.shards, err = newShardMetrics(m.meter, cfg.Node); err != nil {
			return nil, err
		}
		if ws := cfg.Node.WAL(); ws != nil {
			if err := reg.Register(newWALCollector(ws)); err != nil {
				return nil, fmt.Errorf("metrics: wal sync histogram: %w", err)
			}
		}
	}
	if cfg.Audit != nil {
		if err := m.auditMetrics(cfg.Audit); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) buildInfo() error {
	g, err := m.meter.Int64ObservableGauge("warden.build.info",
		metric.WithDescription("Always 1; the labels name the build."))
	if err != nil {
		return err
	}
	set := metric.WithAttributes(attrString("version", m.cfg.Version), attrString("commit", buildinfo.Get().ShortCommit()),
		attrString("goversion", runtime.Version()))
	_, err = m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, 1, set)
		return nil
	}, g)
	return err
}

// routerMetrics exports what the router counts itself.
func (m *Metrics) routerMetrics(r Router) error {
	var b builder
	b.m = m.meter
	forwarded := b.counter("warden.router.forwarded", "{request}",
		"Requests this node's router sent on to another node (a client reached a node that does not lead the shard).")
	if b.err != nil {
		return b.err
	}
	_, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(forwarded, int64(r.Forwarded()))
		return nil
	}, forwarded)
	return err
}

func (m *Metrics) auditMetrics(a Audit) error {
	var b builder
	b.m = m.meter
	written := b.counter("warden.audit.records.written", "{event}", "Applied events written to this node's audit store.")
	dropped := b.counter("warden.audit.records.dropped", "{event}", "Applied events not recorded because the audit queue was full.")
	values := b.counter("warden.audit.values.written", "{value}", "Values (pebble keys) written to the audit store: each holds a run of one shard's applied entries.")
	entries := b.counter("warden.audit.entries.written", "{entry}", "Applied entries whose events were written to the audit store.")
	forced := b.counter("warden.audit.durable.flushes", "{flush}", "Flushes the audit store forced so that the records a snapshot covers are durable.")
	covered := b.counter("warden.audit.durable.covered", "{call}", "Snapshots whose records a flush of the store's own had already made durable (no flush forced).")
	if b.err != nil {
		return b.err
	}
	_, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(written, int64(a.Written()))
		o.ObserveInt64(dropped, int64(a.Dropped()))
		v, e := a.Values()
		o.ObserveInt64(values, int64(v))
		o.ObserveInt64(entries, int64(e))
		f, c := a.DurableFlushes()
		o.ObserveInt64(forced, int64(f))
		o.ObserveInt64(covered, int64(c))
		return nil
	}, written, dropped, values, entries, forced, covered)
	return err
}

// Handler serves the Prometheus text exposition.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Timeout: 10 * time.Second})
}

// Registry is the Prometheus registry the metrics are exported to.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Close stops observing the router and the replicas.
func (m *Metrics) Close() {
	if m.cfg.Router != nil {
		m.cfg.Router.SetHooks(nil)
	}
	if m.shards != nil {
		m.shards.close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m.provider.Shutdown(ctx)
}
