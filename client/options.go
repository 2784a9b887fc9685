package client

import (
	"crypto/tls"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/wardenlock/warden/internal/backoff"
	"github.com/wardenlock/warden/wire"
)

// DefaultEndpoint is used when New is given no endpoints: the address
// `make run` (warden dev) listens on.
const DefaultEndpoint = "127.0.0.1:7070"

// Option configures a Client.
type Option func(*config)

type config struct {
	leaseKeys      *leaseKeys // the client's session lease keys (session.go), shared by its connections
	ttlLimits      *ttlLimits // the TTL bounds the handshakes named (ttl.go)
	dialTimeout    time.Duration
	requestTimeout time.Duration
	poolSize       int
	credentials    string
	logger         *slog.Logger
	backoff        backoff.Policy // between retries and reconnects
	tls            *tls.Config
	maxFrame       int
	clock          clock
	direct         bool // send path requests straight to the shard leader's node
	routeRefresh   time.Duration
	tracer         trace.Tracer
}

func defaultConfig() config {
	return config{
		leaseKeys:      &leaseKeys{},
		ttlLimits:      &ttlLimits{},
		dialTimeout:    3 * time.Second,
		requestTimeout: 5 * time.Second,
		poolSize:       2,
		logger:         slog.New(slog.DiscardHandler),
		backoff:        backoff.Policy{Base: 10 * time.Millisecond, Max: 2 * time.Second},
		maxFrame:       wire.DefaultMaxFrame,
		clock:          realClock{},
		direct:         true,
		routeRefresh:   2 * time.Second,
	}
}

// WithoutDirectRouting sends every request through the given endpoints
// (for instance when only a router tier is reachable). By default the client
// learns the range table and sends each request on a path to the node that
// leads its shard, saving a forwarding hop.
func WithoutDirectRouting() Option { return func(c *config) { c.direct = false } }

// WithRouteRefresh sets how often direct routing re-reads the range table
// and the shard leaders (default 2 s). Leader changes are also learnt from
// answers (a forwarding node names the leader), so this mostly bounds how
// long a new range split or move goes unnoticed.
func WithRouteRefresh(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.routeRefresh = d
		}
	}
}

// WithDialTimeout bounds one connection attempt, handshake included
// (default 3 s).
func WithDialTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.dialTimeout = d
		}
	}
}

// WithRequestTimeout bounds one attempt of a request that does not wait for a
// lock or an election (default 5 s). An attempt that times out is retried
// (with the same sequence number) until the caller's context ends.
func WithRequestTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.requestTimeout = d
		}
	}
}

// WithPoolSize sets the number of connections (default 2). Requests are
// pipelined over them, so a handful serves a busy process.
func WithPoolSize(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.poolSize = n
		}
	}
}

// WithCredentials sets the credentials sent in the handshake.
func WithCredentials(auth string) Option {
	return func(c *config) { c.credentials = auth }
}

// WithLogger sets the logger for connection and session events (default:
// discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithBackoff sets the base and cap of the full-jitter backoff used between
// retries and reconnects: retry n waits a random time of up to
// min(max, base·2^n). The default, 10 ms and 2 s, makes the first retries
// after a failover come quickly (an election takes 150–300 ms) and later
// ones back off.
func WithBackoff(base, max time.Duration) Option {
	return func(c *config) {
		if base > 0 {
			c.backoff.Base = base
		}
		if max > 0 {
			c.backoff.Max = max
		}
	}
}

// WithTLS makes connections use TLS with cfg (default: plaintext). When
// cfg.ServerName is empty the endpoint's host name is used.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) { c.tls = cfg }
}

// WithMaxFrame bounds the size of a frame the client accepts (default
// wire.DefaultMaxFrame, 1 MiB).
func WithMaxFrame(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxFrame = n
		}
	}
}

// WithTracer turns tracing on: each call (one lock acquire, put, release,
// ...; retries included) becomes a client span from t, a child of the span in
// the call's context if there is one, and its W3C trace context travels in
// the request so the router's and the shard's spans join the same trace.
// Off by default (nil): no span, nothing added to requests. Background
// traffic (keepalives, watches) is not traced.
func WithTracer(t trace.Tracer) Option {
	return func(c *config) { c.tracer = t }
}

// Clock is a time source: Now must be monotonic for durations (as
// time.Now's readings are).
type Clock interface{ Now() time.Time }

// WithClock makes sessions read the time from clk: their keepalive
// schedule and their local lease deadline (Session.Err, and so whether a
// grant may still be reported). Timers still wait real durations, computed
// from clk's readings. A clock that runs ahead models a process that was
// paused: its sessions end by their own deadline before they hear from the
// service again.
func WithClock(clk Clock) Option {
	return func(c *config) { c.clock = nowClock{clk} }
}

// nowClock is a Clock whose timers are real ones.
type nowClock struct{ Clock }

func (nowClock) NewTimer(d time.Duration) timer { return realTimer{time.NewTimer(d)} }

// SessionOption configures a Session.
type SessionOption func(*sessionConfig)

type sessionConfig struct {
	ttl time.Duration
}

// DefaultSessionTTL is the lease TTL of a session made without WithTTL.
const DefaultSessionTTL = 10 * time.Second

// WithTTL sets the session's lease TTL (default 10 s; 0 keeps the default).
// The cluster accepts 1 s..600 s unless configured otherwise; NewSession
// refuses a TTL outside the bounds the cluster named at the handshake, or
// a negative one, with a *TTLError. Keepalives are sent every TTL/3.
func WithTTL(d time.Duration) SessionOption {
	return func(c *sessionConfig) {
		if d != 0 {
			c.ttl = d
		}
	}
}

// LockOption configures a Mutex, RWMutex, Election or Client.Acquire.
type LockOption func(*lockConfig)

type lockConfig struct {
	owner     string
	mode      wire.Mode
	try       bool
	signed    bool
	revocable bool
	lockDelay int64
	priority  int64
}

// apply sets the request fields the options control.
func (c *lockConfig) apply(req *wire.Request) {
	if c.signed {
		req.Flags |= wire.FlagSigned
	}
	if c.revocable {
		req.Flags |= wire.FlagRevocable
	}
	req.LockDelay = c.lockDelay
	if req.Op == wire.OpCampaign {
		req.Priority = c.priority
	}
}

// WithRevocable lets waiters (not only admins) ask the service to revoke the
// lock: its holder is told (Client.RevokeRequests) and has the requested
// grace to release before the service revokes it.
func WithRevocable() LockOption { return func(c *lockConfig) { c.revocable = true } }

// WithLockDelay sets the lock-delay of this lock: after its holder's lease
// expires, or it is revoked, the path is granted to nobody for d (a graceful
// release starts no delay). Without it the cluster's default applies; a
// negative d turns lock-delay off for this lock.
func WithLockDelay(d time.Duration) LockOption {
	return func(c *lockConfig) {
		if d < 0 {
			c.lockDelay = wire.LockDelayNone
		} else {
			c.lockDelay = max(1, d.Milliseconds())
		}
	}
}

// WithPriority gives an Election candidate a priority: when leadership is
// free, the waiting candidate with the highest priority is elected (ties in
// campaign order). A leader is never preempted.
func WithPriority(p int64) LockOption { return func(c *lockConfig) { c.priority = p } }

// WithSignedToken asks for each grant to come with the cluster's Ed25519
// signature over (path, token, shard, expiry), so resources can verify the
// fencing token offline (see Mutex.Signed and package fence).
func WithSignedToken() LockOption { return func(c *lockConfig) { c.signed = true } }

// WithOwner sets the owner name within the lease. Two acquisitions with the
// same lease and owner are the same holder (reentrant). By default every
// Mutex, RWMutex and Election gets a fresh random owner, so two of them in
// one process exclude each other like sync.Mutex.
func WithOwner(owner string) LockOption {
	return func(c *lockConfig) { c.owner = owner }
}

// WithShared makes Mutex.Lock and Client.Acquire take the lock in shared
// mode. RWMutex ignores it (it has RLock).
func WithShared() LockOption {
	return func(c *lockConfig) { c.mode = wire.Shared }
}

// WithTry makes Client.Acquire fail at once with ErrConflict instead of
// waiting. (Mutex has TryLock.)
func WithTry() LockOption {
	return func(c *lockConfig) { c.try = true }
}

// OpOption configures a KV, watch or query call. Each call reads the options
// that apply to it and ignores the others.
type OpOption func(*opConfig)

type opConfig struct {
	prefix    bool
	rev       uint64
	stale     bool
	lease     uint64
	leaseTTL  time.Duration // the lease's TTL: a shard that has not seen the lease yet creates it with it
	limit     uint32
	hasExpect bool
	expect    uint64
	prevKV    bool
	position  Position // a prefix watch's resume position (position.go)
}

func (o *opConfig) flags() uint32 {
	var f uint32
	if o.prefix {
		f |= wire.FlagPrefix
	}
	if o.stale {
		f |= wire.FlagStale
	}
	if o.hasExpect {
		f |= wire.FlagHasExpect
	}
	if o.prevKV {
		f |= wire.FlagPrevKV
	}
	return f
}

func applyOps(opts []OpOption) opConfig {
	var o opConfig
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithPrefix makes Watch follow every path under the given one.
func WithPrefix() OpOption { return func(o *opConfig) { o.prefix = true } }

// WithRev starts a Watch at revision rev (default: from now). The service
// replays retained events from rev on, or reports ErrCompacted.
func WithRev(rev uint64) OpOption { return func(o *opConfig) { o.rev = rev } }

// WithStale allows a read to be served by a follower: faster, possibly stale.
// Reads are linearizable without it.
func WithStale() OpOption { return func(o *opConfig) { o.stale = true } }

// WithLease makes a Put ephemeral: the key is deleted when s ends. The
// put carries the session's TTL and lease key, so it works on a shard the
// session has not used before.
func WithLease(s *Session) OpOption {
	return func(o *opConfig) { o.lease, o.leaseTTL = s.Lease(), s.TTL() }
}

// WithLimit bounds the entries List and ListLocks return (0: server default).
func WithLimit(n uint32) OpOption { return func(o *opConfig) { o.limit = n } }

// WithExpectVersion makes Delete conditional on the key's version.
func WithExpectVersion(v uint64) OpOption {
	return func(o *opConfig) { o.hasExpect, o.expect = true, v }
}

// WithPrevKV asks Watch events to carry the previous value.
func WithPrevKV() OpOption { return func(o *opConfig) { o.prevKV = true } }
