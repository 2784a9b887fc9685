package router

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/wire"
)

// Security says who may connect and what they may do. The zero value is
// the old open behaviour: no authentication, no per-identity rate limit,
// only the default connection and watch limits.
type Security struct {
	// Policy turns authentication and authorization on: every connection
	// must prove an identity in Hello (client certificate or token) and
	// every request is checked against its roles. nil = off.
	Policy *auth.Policy
	// PeerCAs verify node certificates: a connection whose client
	// certificate chains to them is another node's forwarding connection.
	PeerCAs *x509.CertPool
	// PeerTLS is used to dial other nodes (nil = plaintext).
	PeerTLS *tls.Config
	// LiveTLS, when set, supplies PeerTLS and PeerCAs for every new
	// connection, so certificates read again from their files
	// (auth.LiveTLS.Reload, on SIGHUP) are used without a restart.
	LiveTLS *auth.LiveTLS
	// PeerSecret authenticates forwarding connections without mTLS (sent
	// in Hello.Auth with FlagPeer). Falls back to Policy.PeerSecret().
	PeerSecret string

	MaxConnsPerAddr int           // open connections per client IP (default 1024; <0 = unlimited)
	MaxWatches      int           // watch streams per connection (default 4096)
	Rate            float64       // requests per second per identity, or per client IP with auth off (default DefaultIdentityRate with auth on, unlimited without; <0 = unlimited)
	Burst           int           // token bucket depth (default max(1, Rate))
	HelloTimeout    time.Duration // a new connection must complete TLS and Hello within it (default 10 s)
	FrameTimeout    time.Duration // after the handshake, a frame must arrive whole within it once begun (default 30 s; idle.go)
	IdleTimeout     time.Duration // a connection with nothing open and silent this long is closed (default 10 min; <0 = never)
	ConnRate        float64       // new connections per second per client IP (default 500; <0 = unlimited)
	ConnBurst       int           // (default 2 × ConnRate)
	MaxOversize     int           // oversized frames skipped per connection before it is closed (default 0: the first closes it)
	ByteRate        float64       // bytes per second read from one client IP (default 128 MiB/s; <0 = unlimited)
	ByteBurst       int           // (default 16 MiB, at least MaxFrame)
	FrameRate       float64       // frames per second read from one client IP (default 500000; <0 = unlimited)
	FrameBurst      int           // (default FrameRate/10)
	AcceptRate      float64       // connections accepted per second, all addresses (default 2000; <0 = unpaced)
	AcceptBurst     int           // (default AcceptRate)
	// MaxIdentityWatches bounds the watch streams of one identity on this
	// router, all its connections together (auth on; default
	// DefaultIdentityWatches; <0 = unlimited).
	MaxIdentityWatches int
	// RefusalRate bounds the refused connections (per-IP limits) answered
	// with a TooMany frame, all addresses together: a client that meets a
	// limit now and then is told why and when to retry; past this rate
	// refusals are a flood, and the rest are closed with a reset and no
	// answer (default 200/s, burst the same; <0 = answer every one).
	RefusalRate float64
	// UnfairReads makes the connections of one IP share its byte and frame
	// budgets first come, first served. By default each connection has a
	// fair share (1/n of the budgets while the IP has n connections) that
	// it uses without waiting on the others; only a connection over its
	// share pays the IP's debt (flood.go).
	UnfairReads bool
	Audit       *slog.Logger // admin actions and refusals (default: the router's log)
}

// DefaultIdentityRate is the request rate one identity gets on one router
// when auth is on and Security.Rate is not set: far above what one
// service's clients send in normal operation, low enough that one tenant
// cannot take a node's whole capacity (a node serves about 100k lock ops/s).
const DefaultIdentityRate = 10_000

// DefaultFrameTimeout and DefaultIdleTimeout are Security.FrameTimeout's
// and Security.IdleTimeout's defaults.
const (
	DefaultFrameTimeout = 30 * time.Second
	DefaultIdleTimeout  = 10 * time.Minute
)

// DefaultIdentityWatches is Security.MaxIdentityWatches's default: four
// connections' worth of the per-connection limit.
const DefaultIdentityWatches = 16_384

func (sc *Security) fill(log *slog.Logger) {
	if sc.MaxConnsPerAddr == 0 {
		sc.MaxConnsPerAddr = 1024
	}
	if sc.MaxWatches <= 0 {
		sc.MaxWatches = 4096
	}
	if sc.MaxIdentityWatches == 0 {
		sc.MaxIdentityWatches = DefaultIdentityWatches
	}
	if sc.Rate == 0 && sc.Policy != nil {
		sc.Rate = DefaultIdentityRate
	}
	if sc.Rate > 0 && sc.Burst <= 0 {
		sc.Burst = max(1, int(sc.Rate))
	}
	if sc.HelloTimeout <= 0 {
		sc.HelloTimeout = 10 * time.Second
	}
	if sc.FrameTimeout <= 0 {
		sc.FrameTimeout = DefaultFrameTimeout
	}
	if sc.IdleTimeout == 0 {
		sc.IdleTimeout = DefaultIdleTimeout
	}
	if sc.ConnRate == 0 {
		sc.ConnRate = 500
	}
	if sc.ConnRate > 0 && sc.ConnBurst <= 0 {
		sc.ConnBurst = max(1, int(2*sc.ConnRate))
	}
	if sc.MaxOversize < 0 {
		sc.MaxOversize = 0
	}
	if sc.ByteRate == 0 {
		sc.ByteRate = 128 << 20
	}
	if sc.ByteBurst <= 0 {
		sc.ByteBurst = 16 << 20
	}
	if sc.FrameRate == 0 {
		sc.FrameRate = 500_000
	}
	if sc.FrameBurst <= 0 {
		sc.FrameBurst = max(1, int(sc.FrameRate/10))
	}
	if sc.AcceptRate == 0 {
		sc.AcceptRate = 2000
	}
	if sc.RefusalRate == 0 {
		sc.RefusalRate = 200
	}
	if sc.AcceptBurst <= 0 {
		sc.AcceptBurst = max(1, int(sc.AcceptRate))
	}
	if sc.Audit == nil {
		sc.Audit = log
	}
	if sc.PeerSecret == "" {
		sc.PeerSecret = sc.Policy.PeerSecret()
	}
}

// peerProofRequired: once anything about security is configured, a
// connection that claims to be a forwarding node must prove it; otherwise a
// client could set FlagPeer and skip every check.
func (sc *Security) peerProofRequired() bool {
	return sc.Policy != nil || sc.PeerSecret != "" || sc.peerCAs() != nil
}

func (sc *Security) peerTLS() *tls.Config {
	if sc.LiveTLS != nil {
		return sc.LiveTLS.Current().Peer
	}
	return sc.PeerTLS
}

func (sc *Security) peerCAs() *x509.CertPool {
	if sc.LiveTLS != nil {
		return sc.LiveTLS.Current().PeerCAs
	}
	return sc.PeerCAs
}

// policy is the policy in use: Security.Policy, or what SetPolicy put in
// its place.
func (s *Server) policy() *auth.Policy { return s.pol.Load() }

// SetPolicy puts a new policy in place (a reloaded --auth-config): new
// handshakes are checked against it and so is every request from then on.
// A connection whose token the new policy no longer has (or maps to another
// identity), or whose certificate identity has lost its roles, is answered
// Unauthorized at its next request and closed. Authentication cannot be
// turned on or off this way, and a changed peer-secret is used only after
// a restart.
func (s *Server) SetPolicy(p *auth.Policy) error {
	if err := s.CheckPolicy(p); err != nil {
		return err
	}
	old := s.pol.Load()
	if p != nil && p.PeerSecret() != old.PeerSecret() {
		s.log.Warn("router: the reloaded auth config changes peer-secret; the old one stays in use until a restart")
	}
	s.pol.Store(p)
	return nil
}

// CheckPolicy reports whether SetPolicy would take p.
func (s *Server) CheckPolicy(p *auth.Policy) error {
	if (p == nil) != (s.pol.Load() == nil) {
		return errors.New("router: turning authentication on or off needs a restart")
	}
	return nil
}

// recheck proves the connection's credentials again against a policy that
// replaced the one they were checked with.
func (c *conn) recheck(pol *auth.Policy) error {
	switch {
	case c.sec.token != "":
		if id, ok := pol.Token(c.sec.token); !ok || id != c.sec.identity {
			return wire.Errorf(wire.Unauthorized, "the token of this connection (identity %q) was withdrawn", c.sec.identity)
		}
	case !pol.Known(c.sec.identity):
		return wire.Errorf(wire.Unauthorized, "identity %q no longer has roles", c.sec.identity)
	}
	c.sec.pol = pol
	return nil
}

// connSecurity is what a connection proved in its Hello.
type connSecurity struct {
	identity       string       // "" when auth is off and no certificate was shown
	token          string       // the bearer token it was proven with, if any
	pol            *auth.Policy // the policy identity was proven against (reader goroutine only)
	rateKey        string       // identity, or the client IP when auth is off
	pendingWatches atomic.Int32
	oversize       int // oversized frames skipped so far (reader goroutine only)
	// ownsClients: auth is on, so the connection's client ids are scoped
	// to its identity (clients.go). lastClient/lastOwned cache the last
	// one (reader goroutine only): a connection nearly always sends one.
	ownsClients           bool
	lastClient, lastOwned uint64
	helloOwned            atomic.Uint64 // the owned id of the Hello's Client
	idWatches             *atomic.Int32 // the identity's watches on this router (auth on; nil: not counted)
}

// gate is the router's admission state shared by all connections.
type gate struct {
	mu       sync.Mutex
	perAddr  map[string]int
	budgets  map[string]*hostBudget   // per-IP read budgets, while the IP has connections (flood.go)
	limiters map[string]*rate.Limiter // requests, by identity
	accepts  map[string]*rate.Limiter // new connections, by client IP
	watches  map[string]*atomic.Int32 // watch streams, by identity (auth on)
}

// admitConn applies the per-address connection limits and the handshake
// deadline to a newly accepted connection and returns the IP's read budget.
// A refused connection gets one TooMany frame (best effort) and is closed;
// admitConn then returns nil.
func (s *Server) admitConn(nc net.Conn) *hostBudget {
	sec := &s.cfg.Security
	host := remoteHost(nc)
	s.gate.mu.Lock()
	if s.gate.perAddr == nil {
		s.gate.perAddr = map[string]int{}
		s.gate.budgets = map[string]*hostBudget{}
	}
	n := s.gate.perAddr[host]
	var msg string
	refused := sec.MaxConnsPerAddr > 0 && n >= sec.MaxConnsPerAddr
	if refused {
		msg = fmt.Sprintf("too many connections from %s (limit %d)", host, sec.MaxConnsPerAddr)
	} else if !s.acceptToken(host) {
		refused = true
		msg = fmt.Sprintf("too many new connections from %s (limit %g per second)", host, sec.ConnRate)
	}
	var budget *hostBudget
	if !refused {
		s.gate.perAddr[host] = n + 1
		budget = s.gate.budgets[host]
		if budget == nil {
			budget = s.newHostBudget()
			s.gate.budgets[host] = budget
		}
		budget.conns.Add(1)
	}
	s.gate.mu.Unlock()
	if refused {
		connsRefused.Add(1)
		b, _ := wire.AppendFrame(nil, &wire.Response{Code: wire.TooMany, Msg: msg, TTL: 1000})
		refuse(nc, b, s.refusals)
		return nil
	}
	nc.SetReadDeadline(time.Now().Add(sec.HelloTimeout))
	return budget
}

// acceptToken spends a token of host's new-connection bucket; s.gate.mu
// is held. Refused connections cost a goroutine and a small write, not a
// reader, a writer and their buffers.
func (s *Server) acceptToken(host string) bool {
	sec := &s.cfg.Security
	if sec.ConnRate <= 0 {
		return true
	}
	if s.gate.accepts == nil {
		s.gate.accepts = map[string]*rate.Limiter{}
	}
	lim := s.gate.accepts[host]
	if lim == nil {
		if len(s.gate.accepts) >= 10000 {
			for k, l := range s.gate.accepts {
				if l.Tokens() >= float64(l.Burst()) {
					delete(s.gate.accepts, k)
				}
			}
		}
		lim = rate.NewLimiter(rate.Limit(sec.ConnRate), sec.ConnBurst)
		s.gate.accepts[host] = lim
	}
	return lim.Allow()
}

// oversizeSkip is how large an oversized body the reader may discard to
// stay in step: none before the handshake (a stranger streaming junk), none
// once MaxOversize frames were skipped (by default none at all: the first
// oversized length prefix closes the connection), and never more than four
// frames' worth.
func (c *conn) oversizeSkip() int {
	if !c.hello || c.sec.oversize >= c.s.cfg.Security.MaxOversize {
		return 0
	}
	return 4 * c.s.cfg.MaxFrame
}

// releaseConn undoes admitConn when the connection ends.
func (s *Server) releaseConn(nc net.Conn) {
	host := remoteHost(nc)
	s.gate.mu.Lock()
	if s.gate.perAddr[host] <= 1 {
		delete(s.gate.perAddr, host)
		delete(s.gate.budgets, host)
	} else {
		s.gate.perAddr[host]--
		if b := s.gate.budgets[host]; b != nil {
			b.conns.Add(-1)
		}
	}
	s.gate.mu.Unlock()
}

func remoteHost(nc net.Conn) string {
	addr := nc.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// Flood counters, process-wide (tests and the flood benchmark read them
// through ReadFloodStats).
var (
	connsRefused   atomic.Int64 // refused by the per-address limits
	acceptsPaced   atomic.Int64 // accepts delayed by AcceptRate
	throttledReads atomic.Int64 // reader pauses for an IP over its byte/frame budget
	oversizeClosed atomic.Int64 // connections closed for an oversized length prefix
	silentRefusals atomic.Int64 // refused connections closed without an answer (over Security.RefusalRate)
	stalledClosed  atomic.Int64 // connections closed for a frame incomplete past Security.FrameTimeout
	idleClosed     atomic.Int64 // connections closed after Security.IdleTimeout with nothing open
)

// FloodStats counts what the flood protections did, in this process.
type FloodStats struct {
	ConnsRefused, AcceptsPaced, ReadsThrottled, OversizeClosed int64
	SilentRefusals                                             int64 // refused without an answer frame (a flood of refusals)
	StalledClosed, IdleClosed                                  int64 // closed by the frame and idle timeouts (idle.go)
}

// ReadFloodStats returns the process-wide flood counters.
func ReadFloodStats() FloodStats {
	return FloodStats{connsRefused.Load(), acceptsPaced.Load(), throttledReads.Load(), oversizeClosed.Load(), silentRefusals.Load(),
		stalledClosed.Load(), idleClosed.Load()}
}

// admit is called for every request before it is routed or proposed. It
// answers a refused request itself and returns nil; otherwise it returns
// where to answer (wrapped for watches, which it counts).
func (c *conn) admit(req *wire.Request, done wire.Answerer) wire.Answerer {
	if req.Op == wire.OpHello {
		if err := c.authenticate(req); err != nil {
			c.s.cfg.Security.Audit.Info("auth: handshake refused", "remote", c.nc.RemoteAddr().String(), "err", err)
			done.Answer(errorResponse(req.ID, err))
			c.close()
			return nil
		}
		c.nc.SetReadDeadline(time.Time{})
		keepAlive(c.nc)
		return done
	}
	if c.peer {
		return done // forwarded by an authenticated node, which checked its client
	}
	if pol := c.s.policy(); pol != c.sec.pol {
		if err := c.recheck(pol); err != nil {
			c.s.cfg.Security.Audit.Info("auth: credentials withdrawn", "remote", c.nc.RemoteAddr().String(), "err", err)
			done.Answer(errorResponse(req.ID, err))
			c.close()
			return nil
		}
	}
	if err := c.authorize(req); err != nil {
		done.Answer(errorResponse(req.ID, err))
		return nil
	}
	if wait, ok := c.s.takeToken(c.sec.rateKey, req.Op); !ok {
		done.Answer(&wire.Response{ID: req.ID, Code: wire.TooMany, TTL: wait.Milliseconds() + 1,
			Msg: fmt.Sprintf("request rate of %q over %g/s; retry after %v", c.sec.rateKey, c.s.cfg.Security.Rate, wait.Round(time.Millisecond))})
		return nil
	}
	if req.Op == wire.OpWatch {
		return c.admitWatch(req, done)
	}
	return done
}

// authenticate establishes the connection's identity from its Hello.
func (c *conn) authenticate(req *wire.Request) error {
	sec := &c.s.cfg.Security
	var certID string
	var isNode bool
	if tc, ok := c.nc.(*tls.Conn); ok {
		if st := tc.ConnectionState(); len(st.PeerCertificates) > 0 {
			leaf := st.PeerCertificates[0]
			certID = auth.IdentityFromCert(leaf)
			isNode = auth.IsNode(leaf, st.PeerCertificates[1:], sec.peerCAs())
		}
	}
	c.sec.rateKey = remoteHost(c.nc)
	if req.Has(wire.FlagPeer) {
		secretOK := sec.PeerSecret != "" && subtle.ConstantTimeCompare([]byte(req.Auth), []byte(sec.PeerSecret)) == 1
		if sec.peerProofRequired() && !isNode && !secretOK {
			return wire.Errorf(wire.Unauthorized, "a forwarding (peer) connection needs a node certificate or the cluster's peer secret")
		}
		c.sec.identity = "node"
		return nil
	}
	pol := c.s.policy()
	if pol == nil {
		c.sec.identity = certID
		return nil
	}
	id, err := pol.Identify(req.Auth, certID)
	if err != nil {
		if errors.Is(err, auth.ErrNoCredentials) {
			return wire.Errorf(wire.Unauthorized, "%v in Hello.Auth", err)
		}
		return wire.Errorf(wire.Unauthorized, "%v", err)
	}
	c.sec.token = req.Auth
	c.sec.identity, c.sec.rateKey, c.sec.pol = id, id, pol
	c.sec.ownsClients = true
	c.sec.idWatches = c.s.identityWatches(id)
	return nil
}

// leaseIdentity is the identity stamped on a client's request for the state
// machine to bind leases to and check them against (Request.Identity): the
// proven identity when auth is on and the request names a lease, makes a
// single-lock lease (acquire or campaign without one) or names a holder by
// its token, else "". Whatever the client put there is overwritten.
func (c *conn) leaseIdentity(req *wire.Request) string {
	if c.s.policy() == nil || !leaseBearing(req) {
		return ""
	}
	return c.sec.identity
}

func leaseBearing(req *wire.Request) bool {
	switch req.Op {
	case wire.OpAcquire, wire.OpCampaign, wire.OpRelease, wire.OpResign, wire.OpRenew, wire.OpProclaim, wire.OpHandOver:
		return true
	}
	return req.Lease != 0 || len(req.Leases) > 0
}

// opPerm is the permission an op needs on its path; 0 = any authenticated
// identity may send it (status, ranges, keepalive, revoke, session,
// unwatch, and a cancel of one of this connection's own waits). The range
// table (ranges) stays open: clients route with it.
func opPerm(req *wire.Request) auth.Perm {
	switch req.Op {
	case wire.OpAcquire, wire.OpRelease, wire.OpRenew, wire.OpCampaign, wire.OpProclaim, wire.OpResign,
		wire.OpAcquireMulti, wire.OpHandOver:
		return auth.Lock
	case wire.OpRevokeLock:
		if req.Has(wire.FlagForce) {
			return auth.Admin // revoking a lock its holder did not offer
		}
		return auth.Lock
	case wire.OpCancel:
		if req.Path != "" {
			return auth.Lock
		}
	case wire.OpLockInfo, wire.OpListLocks, wire.OpKVGet, wire.OpKVList, wire.OpLeader:
		return auth.Read
	case wire.OpRangeList, wire.OpShards, wire.OpShardLog:
		return auth.Read // the cluster's layout and load: read on "/" (clusterWide)
	case wire.OpWatch:
		return auth.Watch
	case wire.OpKVPut, wire.OpKVDelete:
		return auth.KVWrite
	case wire.OpNodeJoin, wire.OpNodeAdmin, wire.OpReplicaMove, wire.OpShardTransfer,
		wire.OpRangeSplit, wire.OpRangeMerge, wire.OpRangeMove, wire.OpShardAdd, wire.OpShardRetire:
		return auth.Admin
	}
	return 0
}

// clusterWide ops are about the whole cluster, not a path: their
// permission is checked on "/" (a grant on a narrower prefix is not
// enough), whatever path they carry.
func clusterWide(op wire.Op) bool {
	return clusterAdmin(op) || op == wire.OpRangeList || op == wire.OpShards || op == wire.OpShardLog
}

// clusterAdmin ops change the cluster's machines or its ranges: they need the admin
// permission on "/" (a grant on a narrower prefix is not enough).
func clusterAdmin(op wire.Op) bool {
	switch op {
	case wire.OpNodeJoin, wire.OpNodeAdmin, wire.OpReplicaMove, wire.OpShardTransfer,
		wire.OpRangeSplit, wire.OpRangeMerge, wire.OpRangeMove, wire.OpShardAdd, wire.OpShardRetire:
		return true
	}
	return false
}

// auditAdmin records a machines admin request (node add, drain, remove,
// replica move, leader transfer) that passed authorization: who asked for
// what (its JSON argument, cut at 256 bytes).
func (c *conn) auditAdmin(req *wire.Request) {
	args := req.Value
	if len(args) > 256 {
		args = args[:256]
	}
	c.s.cfg.Security.Audit.Info("admin: machines", "identity", c.sec.identity, "op", req.Op.String(), "args", string(args))
}

// authorize checks req against the connection's identity. A grant on the
// path or one of its ancestors covers the path's whole subtree, which is
// what a lock on it blocks and what a prefix list or watch shows.
func (c *conn) authorize(req *wire.Request) error {
	pol := c.s.policy()
	if pol == nil {
		return nil
	}
	perm := opPerm(req)
	if perm == 0 {
		return nil
	}
	if req.Op == wire.OpAcquireMulti {
		return c.authorizeAll(req, pol, perm)
	}
	// Validate first: the check walks the path's ancestors, which only
	// means something for a normalised path.
	path := req.Path
	if clusterWide(req.Op) {
		path = "/" // cluster-wide: the permission on the root, whatever path is given
	}
	if err := hierarchy.Validate(path, c.s.cfg.Paths); err != nil {
		return err
	}
	if pol.Allowed(c.sec.identity, perm, path) {
		return nil
	}
	c.s.denied.Add(c.sec.identity, "identity", c.sec.identity, "op", req.Op.String(), "path", req.Path)
	return wire.Errorf(wire.Unauthorized, "identity %q may not %v %s: needs %v on it or on a parent prefix",
		c.sec.identity, req.Op, req.Path, perm)
}

// rateExempt ops give resources back or keep sessions alive: refusing them
// to a client over its rate would only make it hold things longer.
func rateExempt(op wire.Op) bool {
	switch op {
	case wire.OpKeepAlive, wire.OpRelease, wire.OpCancel, wire.OpUnwatch, wire.OpRevoke, wire.OpResign:
		return true
	}
	return false
}

// takeToken spends one token of key's bucket; when it is empty it reports
// how long until the next token.
func (s *Server) takeToken(key string, op wire.Op) (time.Duration, bool) {
	sec := &s.cfg.Security
	if sec.Rate <= 0 || rateExempt(op) {
		return 0, true
	}
	s.gate.mu.Lock()
	if s.gate.limiters == nil {
		s.gate.limiters = map[string]*rate.Limiter{}
	}
	lim := s.gate.limiters[key]
	if lim == nil {
		if len(s.gate.limiters) >= 10000 {
			s.pruneLimiters()
		}
		lim = rate.NewLimiter(rate.Limit(sec.Rate), sec.Burst)
		s.gate.limiters[key] = lim
	}
	s.gate.mu.Unlock()
	now := time.Now()
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// pruneLimiters drops full buckets (idle identities); s.gate.mu is held.
func (s *Server) pruneLimiters() {
	for k, lim := range s.gate.limiters {
		if lim.Tokens() >= float64(lim.Burst()) {
			delete(s.gate.limiters, k)
		}
	}
}

// admitWatch enforces the per-connection watch limit, counting watches still
// being set up as well as established ones.
func (c *conn) admitWatch(req *wire.Request, done wire.Answerer) wire.Answerer {
	max := c.s.cfg.Security.MaxWatches
	c.mu.Lock()
	n := len(c.watches)
	c.mu.Unlock()
	if n+int(c.sec.pendingWatches.Load()) >= max {
		done.Answer(&wire.Response{ID: req.ID, Code: wire.TooMany,
			Msg: fmt.Sprintf("this connection already has %d watches (limit %d): unwatch some or open another connection", n, max)})
		return nil
	}
	if idw := c.sec.idWatches; idw != nil {
		limit := c.s.cfg.Security.MaxIdentityWatches
		if n := idw.Add(1); limit > 0 && int(n) > limit {
			idw.Add(-1)
			done.Answer(&wire.Response{ID: req.ID, Code: wire.TooMany,
				Msg: fmt.Sprintf("identity %q already has %d watches on this router (quota %d): unwatch some", c.sec.identity, n-1, limit)})
			return nil
		}
	}
	c.sec.pendingWatches.Add(1)
	return wire.AnswerFunc(func(r *wire.Response) {
		c.sec.pendingWatches.Add(-1)
		if r.Code != wire.OK {
			c.sec.unwatched(1) // not established: it does not count
		}
		done.Answer(r)
	})
}

// identityWatches is the shared count of identity's watches on this router
// (admitted and not yet ended, all its connections together).
func (s *Server) identityWatches(identity string) *atomic.Int32 {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	if s.gate.watches == nil {
		s.gate.watches = map[string]*atomic.Int32{}
	}
	n := s.gate.watches[identity]
	if n == nil {
		n = new(atomic.Int32)
		s.gate.watches[identity] = n // identities come from the policy: a bounded set
	}
	return n
}

// unwatched gives back n of the identity's watches.
func (sec *connSecurity) unwatched(n int) {
	if sec.idWatches != nil && n > 0 {
		sec.idWatches.Add(-int32(n))
	}
}

// AuthorizeAdmin checks that identity may perform an admin action (force
// release, range move, node change) on path and writes the attempt to the
// audit log. With auth off every admin action is allowed, and still audited.
func (s *Server) AuthorizeAdmin(identity, op, path string) error {
	pol := s.policy()
	allowed := pol == nil || pol.Allowed(identity, auth.Admin, path)
	s.cfg.Security.Audit.Info("audit", "identity", identity, "op", op, "path", path, "allowed", allowed)
	if !allowed {
		return wire.Errorf(wire.Unauthorized, "identity %q may not %s %s: needs admin on it or on a parent prefix", identity, op, path)
	}
	return nil
}

// peerDialer opens forwarding connections to other nodes.
type peerDialer struct {
	tls    func() *tls.Config // nil = plaintext
	secret string
	checks bool               // this router checks its clients (auth on): it may forward to nodes that do
	learn  func(hello []byte) // takes what a node's handshake answer tells (limits.go)
}

func (d peerDialer) dial(addr string, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	var base *tls.Config
	if d.tls != nil {
		base = d.tls()
	}
	if err != nil || base == nil {
		return nc, err
	}
	cfg := base.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(nc, cfg)
	tc.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("router: TLS to %s: %w", addr, err)
	}
	tc.SetDeadline(time.Time{})
	return tc, nil
}

// authorizeAll checks every path of a multi-lock.
func (c *conn) authorizeAll(req *wire.Request, pol *auth.Policy, perm auth.Perm) error {
	for _, p := range req.Paths {
		if err := hierarchy.Validate(p, c.s.cfg.Paths); err != nil {
			return err
		}
		if !pol.Allowed(c.sec.identity, perm, p) {
			c.s.denied.Add(c.sec.identity, "identity", c.sec.identity, "op", req.Op.String(), "path", p)
			return wire.Errorf(wire.Unauthorized, "identity %q may not %v %s: needs %v on it or on a parent prefix",
				c.sec.identity, req.Op, p, perm)
		}
	}
	return nil
}
