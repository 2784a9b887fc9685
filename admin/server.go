package admin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/wardenlock/warden/audit"
	"github.com/wardenlock/warden/control"
	"github.com/wardenlock/warden/metrics"
	"github.com/wardenlock/warden/router"
)

// Config configures a node's admin server.
type Config struct {
	Host    *control.Host  // required
	Router  *router.Server // required
	Audit   *audit.Store   // nil: /v1/audit answers 404
	DataDir string         // the disk check writes a probe file here
	Log     *slog.Logger
	Version string
	// Metrics is what the node's metrics observe (its version is Version).
	Metrics metrics.Config

	// MaxApplyLag is how many committed entries a replica may have left to
	// apply and still be ready (default 1000).
	MaxApplyLag uint64
	// QueryTimeout bounds one API call's reads (default 5 s).
	QueryTimeout time.Duration

	// TLS serves HTTPS; a client certificate is verified when given and
	// proves an identity (see role). nil: plaintext, which Start refuses on
	// a non-loopback address unless PlaintextAnywhere (CheckExposure).
	TLS               *tls.Config
	PlaintextAnywhere bool
	// Limits bound connections per address and in all, and how long a
	// connection may take to send a request (zero: the defaults).
	Limits Limits
}

// Server is a running admin server.
type Server struct {
	cfg     Config
	ln      net.Listener
	gate    *gate
	srv     *fasthttp.Server
	metrics *metrics.Metrics
	prom    fasthttp.RequestHandler
	checks  []check
	done    chan error
	// stop cancels the context of every net/http handler we serve (the
	// scrape); Close calls it before stopping the server.
	stop context.CancelFunc
}

// Listen opens the admin port early, so the node can advertise the address
// it really got (":0" in tests).
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin: listen: %w", err)
	}
	return ln, nil
}

// Start serves the admin API on ln until Close.
func Start(ln net.Listener, cfg Config) (*Server, error) {
	if cfg.Host == nil || cfg.Router == nil {
		return nil, errors.New("admin: a host and a router are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxApplyLag == 0 {
		cfg.MaxApplyLag = 1000
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 5 * time.Second
	}
	if err := CheckExposure(ln.Addr().String(), cfg.TLS != nil, cfg.PlaintextAnywhere); err != nil {
		return nil, err
	}
	cfg.Limits.fill()
	warnExposure(cfg, ln.Addr().String())
	mc := cfg.Metrics
	mc.Version = cfg.Version
	m, err := metrics.New(mc)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, ln: ln, metrics: m, done: make(chan error, 1), gate: newGate(ln, cfg.Limits, cfg.Log)}
	var serve net.Listener = s.gate
	if cfg.TLS != nil {
		serve = tls.NewListener(serve, cfg.TLS)
	}
	var life context.Context
	life, s.stop = context.WithCancel(context.Background())
	s.prom = adapt(life, m.Handler())
	s.checks = s.readyChecks()
	s.srv = &fasthttp.Server{
		Handler: s.handle,
		Name:    "warden",
		// fasthttp sets ReadTimeout as the deadline of the TLS handshake
		// and of a new connection's first request, and of the rest of a
		// kept-alive connection's request once its first byte arrived.
		ReadTimeout:  cfg.Limits.HeaderTimeout,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  cfg.Limits.IdleTimeout,
		// The admin API takes no bodies.
		MaxRequestBodySize: 4 << 10,
		Concurrency:        workers(cfg.Limits),
		Logger:             discardLogger{},
	}
	go func() { s.done <- s.srv.Serve(serve) }()
	return s, nil
}

// workers is fasthttp's Concurrency (one worker per open connection): twice
// the gate's limit, so that fasthttp never refuses a connection the gate
// let in (its refusal is written from the accept loop, where a TLS client
// that never handshakes would hold it), even while a closed connection's
// worker is still on its way back to the pool.
func workers(l Limits) int {
	if l.MaxConns <= 0 {
		return 0 // fasthttp's default, 256 Ki
	}
	return 2 * l.MaxConns
}

// ConnsRefused counts the connections the per-address and total limits
// reset since Start.
func (s *Server) ConnsRefused() int64 { return s.gate.refused.Load() }

// warnExposure logs, once at start, the ways an exposed admin port is open
// to whoever reaches it: served in clear by the operator's choice, or over
// TLS with authentication off.
func warnExposure(cfg Config, addr string) {
	host, _, _ := net.SplitHostPort(addr)
	if loopbackHost(host) {
		return
	}
	switch {
	case cfg.TLS == nil:
		cfg.Log.Warn("admin: serving the admin port WITHOUT TLS on a non-loopback address (--insecure-plaintext-admin): "+
			"anyone who reaches it reads every key, lock and session, in clear", "addr", addr)
	case cfg.Router.Policy() == nil:
		cfg.Log.Warn("admin: authentication is off (no --auth-config): anyone who reaches the admin port reads every key, lock and session", "addr", addr)
	}
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// Addr is the address the admin server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Metrics are the node's instruments.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// adapt serves h under fasthttp with ctx as every request's context.
// fasthttpadaptor hands net/http the *fasthttp.RequestCtx as the context, and
// a context derived from it (promhttp's timeout) starts a goroutine that reads
// the fasthttp server's done channel, unlocked, while ShutdownWithContext
// resets it: a data race inside fasthttp v1.68.0.
func adapt(ctx context.Context, h http.Handler) fasthttp.RequestHandler {
	return fasthttpadaptor.NewFastHTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(ctx))
	}))
}

// Close stops serving and stops observing the node. A scrape in flight is
// cancelled (it answers 503), as fasthttp's own shutdown would have done.
func (s *Server) Close() error {
	s.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.ShutdownWithContext(ctx)
	<-s.done
	s.metrics.Close()
	return err
}

// handle routes a request to its endpoint, which it serves if the caller
// has the role the endpoint needs (guard.go).
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Error("method not allowed", fasthttp.StatusMethodNotAllowed)
		return
	}
	path := string(ctx.Path())
	c := s.caller(ctx)
	detail := c.role >= roleRead
	need, serve := roleAdmin, func() {}
	switch {
	case path == "/livez":
		need, serve = roleAnyone, func() { s.health(ctx, s.liveChecks(), "", detail) }
	case path == "/readyz", path == "/healthz":
		need, serve = roleAnyone, func() { s.health(ctx, s.checks, "", detail) }
	case strings.HasPrefix(path, "/readyz/"):
		need, serve = roleAnyone, func() { s.health(ctx, s.checks, strings.TrimPrefix(path, "/readyz/"), detail) }
	case path == "/":
		need, serve = roleRead, func() { s.page(ctx, c.role >= roleAdmin) }
	case path == "/metrics":
		need, serve = roleRead, func() { s.prom(ctx) }
	case path == "/v1/status":
		need, serve = roleRead, func() { s.apiStatus(ctx) }
	case path == "/v1/shards":
		need, serve = roleRead, func() { s.apiShards(ctx) }
	case path == "/v1/locks":
		serve = func() { s.apiLocks(ctx) }
	case path == "/v1/sessions":
		serve = func() { s.apiSessions(ctx) }
	case path == "/v1/elections":
		serve = func() { s.apiElections(ctx) }
	case path == "/v1/audit":
		serve = func() { s.apiAudit(ctx) }
	case path == "/v1/backup/table":
		serve = func() { s.apiBackupTable(ctx) }
	case strings.HasPrefix(path, "/v1/backup/shards/"):
		serve = func() { s.apiBackupShard(ctx, path) }
	default:
		ctx.Error("not found", fasthttp.StatusNotFound)
		return
	}
	if c.role < need {
		refuse(ctx, c, need, path)
		return
	}
	serve()
}

// queryCtx bounds the reads of one API call. (A fasthttp RequestCtx has no
// deadline of its own.)
func (s *Server) queryCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.cfg.QueryTimeout)
}
