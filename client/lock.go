package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Lock is a lock with a lease of its own (no session): it lives until
// Release, or until its TTL passes without a Renew.
//
// Its Context ends when the hold ends: given back (ErrReleased), ended by
// the service (a *HoldLostError: revoked, released by another client, or
// expired, cause wire.CauseExpired), or when its TTL has passed on the
// client's clock since the acquire or the last acknowledged Renew was sent
// (also a *HoldLostError with wire.CauseExpired). The service pushes the
// end on the connection the grant or the last renewal was answered on; if
// that connection broke, the next Renew says so (ErrNotHolder).
type Lock struct {
	c     *Client
	path  string
	mode  wire.Mode
	owner string
	token uint64
	lease uint64

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu  sync.Mutex
	ttl time.Duration
	// deadline is the local end of the lease: when the acquire or the
	// last acknowledged renewal was sent, plus its TTL. The service counts
	// from when it applied them, which is later.
	deadline time.Time
	expiry   *time.Timer
}

// Acquire takes path with a single-lock lease of the given TTL. Like
// Mutex.Lock it waits until granted or ctx ends (withdrawing the waiter
// then); with WithTry it fails at once with ErrConflict; WithShared takes it
// shared. The lock expires unless renewed within ttl: use Renew, or a
// Session and Mutex for automatic keepalive. The lease is counted from when
// the acquire was sent; a grant that came after waiting a third of ttl or
// more is renewed once before Acquire returns, so the count starts afresh.
func (c *Client) Acquire(ctx context.Context, path string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	if err := c.cfg.ttlLimits.check(ttl); err != nil {
		return nil, err
	}
	cfg := lockConfigOf(opts)
	req := &wire.Request{Op: wire.OpAcquire, Path: path, Mode: cfg.mode, TTL: millis(ttl),
		Wait: waitFor(ctx, cfg.try), Owner: cfg.owner}
	cfg.apply(req)
	sent := c.cfg.clock.Now()
	resp, err := c.park(ctx, nil, req, nil, releaser{c, 0, cfg.owner})
	if err != nil {
		return nil, err
	}
	l := &Lock{c: c, path: path, mode: cfg.mode, owner: cfg.owner, token: resp.Token,
		lease: resp.Lease, ttl: ttl}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	l.arm(sent, ttl)
	c.singles.add(path, l.token, l)
	if c.cfg.clock.Now().Sub(sent) >= ttl/3 {
		// Waited: the lease began at the grant, but only the send is known.
		// A renewal sent now starts the local count again. If it fails,
		// the count from the send stands.
		_ = l.Renew(ctx, ttl)
	}
	return l, nil
}

// Path returns the locked path.
func (l *Lock) Path() string { return l.path }

// Token returns the fencing token of the grant.
func (l *Lock) Token() uint64 { return l.token }

// Lease returns the id of the lock's own lease.
func (l *Lock) Lease() uint64 { return l.lease }

// TTL returns the lease TTL last set.
func (l *Lock) TTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Context ends when the hold ends (see Lock); context.Cause says why.
func (l *Lock) Context() context.Context { return l.ctx }

// IsHeld reports whether the hold lives: not ended, and its TTL not passed
// on the client's clock since the acquire or the last renewal was sent.
func (l *Lock) IsHeld() bool {
	l.mu.Lock()
	deadline := l.deadline
	l.mu.Unlock()
	return l.ctx.Err() == nil && l.c.cfg.clock.Now().Before(deadline)
}

// Renew restarts the lease's TTL (and sets it to ttl). It fails with
// ErrNotHolder or ErrStaleToken when the service has already ended the lock
// (its Context then ends too), and without asking the service once the
// Context has ended (with its cause when that is a *HoldLostError).
func (l *Lock) Renew(ctx context.Context, ttl time.Duration) error {
	if err := l.c.cfg.ttlLimits.check(ttl); err != nil {
		return err
	}
	if l.ctx.Err() != nil {
		return l.ended()
	}
	req := &wire.Request{Op: wire.OpRenew, Path: l.path, Token: l.token, TTL: millis(ttl),
		Lease: l.lease, Client: l.c.id, Seq: l.c.seqs.begin()}
	defer l.c.seqs.end(req.Seq)
	sent := l.c.cfg.clock.Now()
	if _, err := l.c.call(ctx, req, l.c.cfg.requestTimeout); err != nil {
		if errors.Is(err, ErrNotHolder) || errors.Is(err, ErrStaleToken) {
			l.end(err)
		}
		return err
	}
	l.arm(sent, ttl)
	return nil
}

// Release gives the lock back by its token (which ends its lease). Releasing
// twice, or after expiry, fails with ErrNotHolder or ErrStaleToken and never
// affects a later holder.
func (l *Lock) Release(ctx context.Context) error {
	err := l.c.release(ctx, l.path, l.token, l.lease, l.owner)
	if err == nil || errors.Is(err, ErrNotHolder) || errors.Is(err, ErrStaleToken) {
		l.end(ErrReleased)
	}
	return err
}

// arm sets the local deadline to sent+ttl, unless a later renewal set one
// already, and (re)starts the timer that ends the context there.
func (l *Lock) arm(sent time.Time, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := sent.Add(ttl); d.After(l.deadline) {
		l.deadline = d
		l.ttl = ttl
	}
	left := l.deadline.Sub(l.c.cfg.clock.Now())
	if l.expiry == nil {
		l.expiry = time.AfterFunc(left, l.expire)
	} else {
		l.expiry.Reset(left)
	}
}

// expire ends the hold once its local deadline has passed (a timer may
// fire for a deadline a renewal has moved since).
func (l *Lock) expire() {
	l.mu.Lock()
	left := l.deadline.Sub(l.c.cfg.clock.Now())
	if left > 0 {
		l.expiry.Reset(left)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.end(&HoldLostError{Path: l.path, Token: l.token, Cause: wire.CauseExpired})
}

// holdLost is the service's notice that it ended the hold.
func (l *Lock) holdLost(_ uint64, cause error) { l.end(cause) }

// end ends the hold's context (the first cause stays) and its registration.
func (l *Lock) end(cause error) {
	l.cancel(cause)
	l.mu.Lock()
	if l.expiry != nil {
		l.expiry.Stop()
	}
	l.mu.Unlock()
	l.c.singles.remove(l.path, l.token, l)
}

// ended is what Renew answers once the hold has ended: why, when the
// service or the lease's TTL ended it (a *HoldLostError; after a local
// expiry the service may still hold the lock a little longer, and Release
// still gives it back), else ErrNotHolder.
func (l *Lock) ended() error {
	if cause := context.Cause(l.ctx); errors.Is(cause, ErrHoldLost) {
		return cause
	}
	return notHeld("lock")
}
