package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"sync"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Client is a connection pool to a Warden cluster. It is safe for concurrent
// use; make one per process and share it.
type Client struct {
	cfg    config
	id     uint64 // random client id: the exactly-once identity, same on every connection
	seqs   *seqTracker
	pool   *pool
	ctx    context.Context // cancelled by Close; parents background work
	cancel context.CancelFunc
	wg     sync.WaitGroup // watches, observers
	bg     sync.WaitGroup // the direct router's refresh loop
	direct *directRouter  // nil when direct routing is off

	keepAlives *keepAliveScheduler

	mu       sync.Mutex
	closed   bool
	sessions map[*Session]struct{}
	byLease  map[uint64]*Session // the same sessions, by lease id (hold notices name leases)

	singles heldSet // the live locks of single-lock leases (Acquire), told of their end like a session's holds
}

// New connects to a cluster through the given endpoints (host:port of any
// node or router; DefaultEndpoint when empty). It returns once one connection
// has completed the handshake, trying every endpoint once; the rest of the
// pool connects in the background. ctx bounds only this first connection.
func New(ctx context.Context, endpoints []string, opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if len(endpoints) == 0 {
		endpoints = []string{DefaultEndpoint}
	}
	c := &Client{cfg: cfg, id: randomID(), seqs: newSeqTracker(),
		sessions: make(map[*Session]struct{}), byLease: make(map[uint64]*Session)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.pool = newPool(c.ctx, &c.cfg, append([]string(nil), endpoints...), c.id, holdSink{c})
	if err := c.pool.connectFirst(ctx); err != nil {
		c.cancel()
		c.pool.close()
		return nil, err
	}
	c.keepAlives = newKeepAliveScheduler(c)
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.keepAlives.run() }()
	if c.cfg.direct {
		c.direct = newDirectRouter(c)
		c.bg.Add(1)
		go func() { defer c.bg.Done(); c.direct.run() }()
	}
	return c, nil
}

// pickAvoiding is pick, except that after a failure on endpoint avoid it
// prefers any other endpoint: a pooled connection elsewhere, or a direct one
// it dials to the next endpoint (used on a later attempt once it is up).
func (c *Client) pickAvoiding(ctx context.Context, req *wire.Request, avoid string, rc *routeCache) (*conn, error) {
	if avoid == "" {
		return c.pick(ctx, req, rc)
	}
	if cn := c.pool.live(avoid); cn != nil {
		return cn, nil
	}
	if c.direct != nil {
		for _, ep := range c.pool.endpoints {
			if ep != avoid {
				if cn := c.direct.conn(ep); cn != nil {
					return cn, nil
				}
			}
		}
	}
	return c.pick(ctx, req, rc)
}

// pick chooses the connection for req: direct to its shard leader when
// known, else from the pool. rc, when not nil, remembers where req.Path's
// requests went.
func (c *Client) pick(ctx context.Context, req *wire.Request, rc *routeCache) (*conn, error) {
	if c.direct != nil {
		return c.direct.pick(ctx, req, rc)
	}
	return c.pool.pick(ctx)
}

// ID returns the client's random identity, sent with every exactly-once
// request.
func (c *Client) ID() uint64 { return c.id }

// Close stops every session's keepalive (without revoking: close sessions
// first to release their locks at once, otherwise they expire after their
// TTL), ends watches and closes the connections. Calls in flight fail with
// ErrClientClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	sessions := make([]*Session, 0, len(c.sessions))
	for s := range c.sessions {
		sessions = append(sessions, s)
	}
	c.mu.Unlock()
	for _, s := range sessions {
		s.stop(Closed, fmt.Errorf("%w: %w", ErrSessionClosed, ErrClientClosed))
	}
	c.cancel()
	c.bg.Wait() // the direct router closes its connections on the way out
	c.pool.close()
	c.wg.Wait()
	return nil
}

// Do sends one request and returns its answer: the escape hatch for
// operations the typed API does not cover. It assigns the request id, and
// for mutating operations the client id and a fresh sequence number (unless
// req.Seq is already set), so retries are exactly-once. Retryable codes and
// broken connections are retried with backoff until ctx ends. A non-OK
// answer is returned together with its error (a *wire.Error). OpHello and
// OpWatch are refused: the client does the handshake, and Watch handles
// streams.
func (c *Client) Do(ctx context.Context, req *wire.Request) (*wire.Response, error) {
	if req.Op == wire.OpHello || req.Op == wire.OpWatch || req.Op.Internal() {
		return nil, wire.Errorf(wire.InvalidArgument, "Do cannot send %s", req.Op)
	}
	r := *req
	if (r.Op == wire.OpAcquire || r.Op == wire.OpCampaign) && r.Wait != wire.WaitNone && r.Seq == 0 {
		// A parked request: withdrawn when ctx ends, re-sent after a broken
		// connection, a late grant given back.
		return c.park(ctx, nil, &r, nil, undoFunc(func(ctx context.Context, path string, token uint64) error {
			if r.Op == wire.OpCampaign {
				_, err := c.Do(ctx, &wire.Request{Op: wire.OpResign, Path: path, Token: token, Lease: r.Lease, Owner: r.Owner})
				return err
			}
			return c.release(ctx, path, token, r.Lease, r.Owner)
		}))
	}
	timeout := c.cfg.requestTimeout
	if exactlyOnce(r.Op) && r.Seq == 0 {
		r.Client, r.Seq = c.id, c.seqs.begin()
		defer c.seqs.end(r.Seq)
	}
	return c.call(ctx, &r, timeout)
}

// exactlyOnce reports whether op gets a (Client, Seq) pair. OpCancel is
// mutating but names the Seq of the acquire it withdraws.
func exactlyOnce(op wire.Op) bool {
	return op.Mutating() && op != wire.OpCancel
}

// retrySafe reports whether req may be sent again after its connection broke
// before the answer arrived.
func retrySafe(req *wire.Request) bool {
	return !req.Op.Mutating() || req.Seq != 0 || req.Op == wire.OpCancel
}

// call sends req until it gets a definitive answer. Each attempt is bounded by
// timeout (0: only by ctx). Attempts that fail with a retryable code, a broken
// connection or a timeout are repeated unchanged (same Seq). When ctx ends
// after a mutating request may have reached the server, the error matches
// ErrAmbiguous and the context error.
func (c *Client) call(ctx context.Context, req *wire.Request, timeout time.Duration) (*wire.Response, error) {
	return c.callVia(ctx, req, timeout, nil)
}

// callVia is call for a caller that remembers its path's route in rc.
func (c *Client) callVia(ctx context.Context, req *wire.Request, timeout time.Duration, rc *routeCache) (*wire.Response, error) {
	if c.cfg.tracer != nil && req.Trace == "" {
		ctx, span := c.startSpan(ctx, req)
		resp, err := c.attempts(ctx, req, timeout, rc)
		endSpan(span, resp, err)
		return resp, err
	}
	return c.attempts(ctx, req, timeout, rc)
}

// attempts is callVia without its span.
func (c *Client) attempts(ctx context.Context, req *wire.Request, timeout time.Duration, rc *routeCache) (*wire.Response, error) {
	var (
		maybeApplied bool
		lastErr      error
		avoid        string // endpoint that just failed this request
	)
	for attempt := 0; ; attempt++ {
		if c.ctx.Err() != nil {
			return nil, ErrClientClosed
		}
		if req.Seq != 0 && req.Client == c.id {
			// Only this client's own numbering: a request sent with
			// another client id (Do) keeps the AckSeq it came with.
			req.AckSeq = c.seqs.ack()
		}
		cn, err := c.pickAvoiding(ctx, req, avoid, rc)
		if err != nil {
			return nil, c.giveUp(req, maybeApplied, lastErr, err)
		}
		resp, sent, err := cn.roundTrip(ctx, req, timeout)
		avoid = ""
		if err == nil && resp.Hint != nil && c.direct != nil {
			c.direct.learn(resp.Hint)
		}
		if err != nil || resp.Code == wire.Unavailable {
			avoid = cn.addr // a node cut off from its majority: try another
		}
		switch {
		case err == nil && resp.Code.Retryable():
			lastErr = resp.AsError()
			if c.direct != nil && (resp.Code == wire.NotLeader || resp.Code == wire.WrongShard || resp.Code == wire.RangeMoving) {
				c.direct.stale()
			}
			c.cfg.logger.Debug("warden: retrying", "op", req.Op, "code", resp.Code, "attempt", attempt)
		case err == nil && resp.Code == wire.TooMany && resp.TTL > 0:
			// A rate limit that says when to come back (the request was
			// refused before it was routed, so it is safe to resend).
			lastErr = resp.AsError()
			wait := retryAfter(resp.TTL)
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				return resp, lastErr // the hint is past the caller's deadline: say why now
			}
			c.cfg.logger.Debug("warden: rate limited", "op", req.Op, "retry_after", wait, "attempt", attempt)
			if !sleepCtx(ctx, wait) {
				return nil, c.giveUp(req, maybeApplied, lastErr, ctx.Err())
			}
			continue
		case err == nil:
			return resp, resp.AsError()
		case ctx.Err() != nil:
			return nil, c.giveUp(req, maybeApplied || (sent && req.Op.Mutating()), lastErr, ctx.Err())
		case !transient(err):
			return nil, err // refused locally (encoding, size): never sent
		default: // connection lost or attempt timed out
			maybeApplied = maybeApplied || (sent && req.Op.Mutating())
			lastErr = err
			if !retrySafe(req) {
				return nil, ambiguous(req.Op, err)
			}
			if errors.Is(err, ErrConnLost) && attempt == 0 {
				continue // another connection may be up already
			}
		}
		if err := c.cfg.backoff.Wait(ctx, attempt); err != nil {
			return nil, c.giveUp(req, maybeApplied, lastErr, err)
		}
	}
}

// retryAfter turns a TooMany hint (ms until the server expects to accept
// the request) into a wait, plus up to a quarter more of jitter so clients
// refused together do not return in lockstep.
func retryAfter(hintMS int64) time.Duration {
	d := time.Duration(hintMS) * time.Millisecond
	return d + mathrand.N(d/4+1)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// transient reports whether a failed attempt may succeed when sent again.
func transient(err error) bool {
	return errors.Is(err, ErrConnLost) || errors.Is(err, errAttemptTimeout)
}

// giveUp builds the error for a request abandoned because ctx ended (or the
// client closed) before a definitive answer.
func (c *Client) giveUp(req *wire.Request, maybeApplied bool, lastErr, cause error) error {
	if errors.Is(cause, ErrClientClosed) || c.ctx.Err() != nil {
		cause = ErrClientClosed
	}
	if maybeApplied {
		return ambiguous(req.Op, cause)
	}
	if lastErr != nil && !errors.Is(cause, lastErr) {
		return errors.Join(lastErr, cause)
	}
	return cause
}

// track registers a session so Close can stop it.
func (c *Client) track(s *Session) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClientClosed
	}
	c.sessions[s] = struct{}{}
	c.byLease[s.lease] = s
	return nil
}

func (c *Client) untrack(s *Session) {
	c.mu.Lock()
	delete(c.sessions, s)
	if c.byLease[s.lease] == s {
		delete(c.byLease, s.lease)
	}
	c.mu.Unlock()
	c.cfg.leaseKeys.remove(s.lease)
}

// sessionOf returns the live session of lease, or nil.
func (c *Client) sessionOf(lease uint64) *Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byLease[lease]
}

// goBackground runs f on a goroutine that Close waits for.
func (c *Client) goBackground(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// randomID returns a random non-zero id with the top bit clear (ids with
// the top bit set are reserved for server-made single-lock leases).
func randomID() uint64 {
	var b [8]byte
	for {
		rand.Read(b[:])
		if id := binary.BigEndian.Uint64(b[:]) &^ (1 << 63); id != 0 {
			return id
		}
	}
}

// millis converts a duration to protocol milliseconds, rounding up so a
// positive duration never becomes 0 (which means "none").
func millis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
