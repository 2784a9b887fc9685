package router

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/internal/logagg"
)

// Config configures a router.
type Config struct {
	// Host is the local node; nil for a standalone router process, which
	// forwards everything and learns the table from Seeds.
	Host Host
	// Seeds are node client addresses a standalone router asks for the
	// range table.
	Seeds []string

	MaxFrame       int           // default wire.DefaultMaxFrame
	RequestTimeout time.Duration // retry budget for routing errors (default 10 s)
	DialTimeout    time.Duration // peer dial timeout (default 2 s)
	MaxInflight    int           // requests in flight per connection (default 16384)
	MaxOutBuffer   int           // bytes queued to a slow client before it is cut off (default 32 MiB)
	Paths          hierarchy.Limits
	Log            *slog.Logger
	Security       Security // TLS peers, authentication, per-address/identity/connection limits (auth.go)
	// SigningKey, when set, signs grants that ask for it (FlagSigned):
	// the cluster's Ed25519 key, the same on every node.
	SigningKey ed25519.PrivateKey
	// MinTTL and MaxTTL are the lease TTL bounds the shards enforce
	// (the state machine's config), told to clients at the handshake (limits.go).
	// Zero: a standalone router learns them from the nodes.
	MinTTL, MaxTTL time.Duration
}

func (c *Config) fill() {
	if c.MaxFrame <= 0 {
		c.MaxFrame = 1 << 20
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 2 * time.Second
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = 16384
	}
	if c.MaxOutBuffer <= 0 {
		c.MaxOutBuffer = 32 << 20
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	c.Security.fill(c.Log)
}

// Server accepts client connections and routes their requests.
type Server struct {
	cfg        Config
	log        *slog.Logger
	peers      *peers
	cache      *rangeCache
	keepAlives keepAliveBatcher
	holds      holdHub // hold streams and the feeds they follow (holds.go)
	gate       gate
	denied     *logagg.Line                // "auth: denied", summed up per identity (logagg)
	pol        atomic.Pointer[auth.Policy] // Security.Policy, or what SetPolicy put in its place
	pacer      acceptPacer
	refusals   *rate.Limiter // refusals answered with a frame (nil = all)
	closing    chan struct{} // closed by Close: ends an accept pause
	forwarded  atomic.Uint64 // requests sent on to another node (route.go)
	ttl        ttlBounds     // told to clients at the handshake (limits.go)
	live       liveness      // what this router hears from the other nodes (liveness.go)

	mu     sync.Mutex
	ln     net.Listener
	conns  map[*conn]struct{}
	closed bool
	stop   chan struct{} // standalone: ends the refresh loop
	wg     sync.WaitGroup
}

// New makes a router; call Serve to accept connections.
func New(cfg Config) *Server {
	cfg.fill()
	s := &Server{cfg: cfg, log: cfg.Log, conns: map[*conn]struct{}{}, closing: make(chan struct{}),
		peers: &peers{m: map[string]*peer{}, timeout: cfg.DialTimeout, maxFrame: cfg.MaxFrame,
			dialer: peerDialer{secret: cfg.Security.PeerSecret, checks: cfg.Security.Policy != nil}}}
	s.peers.dialer.tls = s.cfg.Security.peerTLS
	s.ttl.configure(cfg.MinTTL, cfg.MaxTTL)
	s.peers.dialer.learn = s.ttl.learn
	s.pol.Store(cfg.Security.Policy)
	s.denied = logagg.New(cfg.Security.Audit, slog.LevelInfo, "auth: denied", 10*time.Second)
	s.cache = newRangeCache(s)
	s.holds.s = s
	if r := cfg.Security.RefusalRate; r > 0 {
		s.refusals = rate.NewLimiter(rate.Limit(r), max(1, int(r)))
	}
	if cfg.Security.AcceptRate > 0 {
		s.pacer.lim = rate.NewLimiter(rate.Limit(cfg.Security.AcceptRate), cfg.Security.AcceptBurst)
	}
	s.stop = make(chan struct{})
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.livenessLoop() }()
	if cfg.Host == nil {
		go func() { defer s.wg.Done(); s.refreshLoop() }()
	} else {
		go func() { defer s.wg.Done(); s.remoteLeaderLoop() }() // nodes.go
		cfg.Host.SetForwarder(s.forwardInternal)
	}
	return s
}

// refreshLoop keeps a standalone router's table and leader view fresh.
// Routing errors refresh it sooner (coalesced).
func (s *Server) refreshLoop() {
	var lastErr string // logged once per change, not every 100 ms
	for {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DialTimeout)
		err := s.cache.refresh(ctx)
		cancel()
		if msg := errString(err); msg != lastErr {
			if err != nil {
				s.log.Error("router: cannot fetch the range table from the seed nodes", "err", err)
			} else if lastErr != "" {
				s.log.Info("router: range table fetched again")
			}
			lastErr = msg
		}
		wait := time.Second
		if err != nil || s.cache.table() == nil {
			wait = 100 * time.Millisecond
		}
		select {
		case <-s.stop:
			return
		case <-time.After(wait):
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("router: closed")
	}
	s.ln = ln
	s.mu.Unlock()
	for {
		if !s.pacer.wait(s.closing) {
			return nil
		}
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		// (Go sets TCP_NODELAY on accepted connections already.)
		budget := s.admitConn(nc)
		if budget == nil {
			continue
		}
		c := newConn(s, nc, budget)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			s.releaseConn(nc)
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.releaseConn(nc)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, closes every connection and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	if s.stop != nil {
		close(s.stop)
	}
	if s.ln != nil {
		s.ln.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	s.wg.Wait()
	s.peers.closeAll()
	return nil
}

// Conns returns the number of open client connections.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func randomID() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) >> 1
}
