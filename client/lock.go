package client

import (
	"context"
	"sync"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Lock is a lock with a lease of its own (no session): it lives until
// Release, or until its TTL passes without a Renew.
type Lock struct {
	c     *Client
	path  string
	mode  wire.Mode
	owner string
	token uint64
	lease uint64

	mu  sync.Mutex
	ttl time.Duration
}

// Acquire takes path with a single-lock lease of the given TTL. Like
// Mutex.Lock it waits until granted or ctx ends (withdrawing the waiter
// then); with WithTry it fails at once with ErrConflict; WithShared takes it
// shared. The lock expires unless renewed within ttl: use Renew, or a
// Session and Mutex for automatic keepalive.
func (c *Client) Acquire(ctx context.Context, path string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	if err := c.cfg.ttlLimits.check(ttl); err != nil {
		return nil, err
	}
	cfg := lockConfigOf(opts)
	req := &wire.Request{Op: wire.OpAcquire, Path: path, Mode: cfg.mode, TTL: millis(ttl),
		Wait: waitFor(ctx, cfg.try), Owner: cfg.owner}
	cfg.apply(req)
	resp, err := c.park(ctx, nil, req, nil, releaser{c, 0, cfg.owner})
	if err != nil {
		return nil, err
	}
	return &Lock{c: c, path: path, mode: cfg.mode, owner: cfg.owner, token: resp.Token,
		lease: resp.Lease, ttl: ttl}, nil
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

// Renew restarts the lease's TTL (and sets it to ttl). It fails with
// ErrNotHolder or ErrStaleToken when the lock has already ended.
func (l *Lock) Renew(ctx context.Context, ttl time.Duration) error {
	if err := l.c.cfg.ttlLimits.check(ttl); err != nil {
		return err
	}
	req := &wire.Request{Op: wire.OpRenew, Path: l.path, Token: l.token, TTL: millis(ttl),
		Lease: l.lease, Client: l.c.id, Seq: l.c.seqs.begin()}
	defer l.c.seqs.end(req.Seq)
	if _, err := l.c.call(ctx, req, l.c.cfg.requestTimeout); err != nil {
		return err
	}
	l.mu.Lock()
	l.ttl = ttl
	l.mu.Unlock()
	return nil
}

// Release gives the lock back by its token (which ends its lease). Releasing
// twice, or after expiry, fails with ErrNotHolder or ErrStaleToken and never
// affects a later holder.
func (l *Lock) Release(ctx context.Context) error {
	return l.c.release(ctx, l.path, l.token, l.lease, l.owner)
}
