package admin

import (
	"context"
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
	"github.com/wardenlock/warden/metrics"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/shard"
)

// Config configures a node's admin server.
type Config struct {
	Host    *shard.Host    // required
	Router  *router.Server // required
	Audit   *audit.Store   // nil: /v1/audit answers 404
	DataDir string         // the disk check writes a probe file here
	Log     *slog.Logger
	Version string

	// MaxApplyLag is how many committed entries a replica may have left to
	// apply and still be ready (default 1000).
	MaxApplyLag uint64
	// QueryTimeout bounds one API call's reads (default 5 s).
	QueryTimeout time.Duration
}

// Server is a running admin server.
type Server struct {
	cfg     Config
	ln      net.Listener
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
	m, err := metrics.New(metrics.Config{Host: cfg.Host, Router: cfg.Router, Version: cfg.Version, Audit: cfg.Audit})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, ln: ln, metrics: m, done: make(chan error, 1)}
	var life context.Context
	life, s.stop = context.WithCancel(context.Background())
	s.prom = adapt(life, m.Handler())
	s.checks = s.readyChecks()
	s.srv = &fasthttp.Server{
		Handler:      s.handle,
		Name:         "warden",
		ReadTimeout:  10 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  time.Minute,
		// The admin API takes no bodies.
		MaxRequestBodySize: 4 << 10,
		Concurrency:        256,
		Logger:             discardLogger{},
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
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

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Error("method not allowed", fasthttp.StatusMethodNotAllowed)
		return
	}
	path := string(ctx.Path())
	switch {
	case path == "/":
		s.page(ctx)
	case path == "/metrics":
		s.prom(ctx)
	case path == "/livez":
		s.health(ctx, s.liveChecks(), "")
	case path == "/readyz", path == "/healthz":
		s.health(ctx, s.checks, "")
	case strings.HasPrefix(path, "/readyz/"):
		s.health(ctx, s.checks, strings.TrimPrefix(path, "/readyz/"))
	case path == "/v1/status":
		s.apiStatus(ctx)
	case path == "/v1/locks":
		s.apiLocks(ctx)
	case path == "/v1/sessions":
		s.apiSessions(ctx)
	case path == "/v1/elections":
		s.apiElections(ctx)
	case path == "/v1/shards":
		s.apiShards(ctx)
	case path == "/v1/audit":
		s.apiAudit(ctx)
	case path == "/v1/backup/table":
		s.apiBackupTable(ctx)
	case strings.HasPrefix(path, "/v1/backup/shards/"):
		s.apiBackupShard(ctx, path)
	default:
		ctx.Error("not found", fasthttp.StatusNotFound)
	}
}

// queryCtx bounds the reads of one API call. (A fasthttp RequestCtx has no
// deadline of its own.)
func (s *Server) queryCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.cfg.QueryTimeout)
}
