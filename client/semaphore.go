package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/wardenlock/warden/wire"
)

// Semaphore is a counting semaphore of N permits on one path, owned by a
// session. Each Acquire takes one permit with its own fencing token; waiters
// are served in FIFO order and a permit ends with its session. A permit is a
// shared hold on the path, so the semaphore conflicts with exclusive locks on
// the path's ancestors and descendants (a parent lock waits until every
// permit is back) but not with other semaphores or shared locks elsewhere.
// The path must be used as a semaphore of the same N by everyone while any
// permit is out; a plain lock on the same path conflicts with permits.
type Semaphore struct {
	s       *Session
	path    string
	permits uint32
	opts    lockConfig
}

// Permit is one permit of a Semaphore.
type Permit struct {
	sem   *Semaphore
	owner string
	token uint64
	life  holdLife
}

// NewSemaphore returns a semaphore of permits (>= 1) on path. It does not
// talk to the service. WithRevocable and WithLockDelay apply to each permit.
func NewSemaphore(s *Session, path string, permits int, opts ...LockOption) *Semaphore {
	return &Semaphore{s: s, path: path, permits: uint32(max(permits, 0)), opts: lockConfigOf(opts)}
}

// Acquire takes a permit, waiting in FIFO order until one is free or ctx (or
// the session) ends; see Mutex.Lock for how a wait is withdrawn and what
// each error leaves.
func (m *Semaphore) Acquire(ctx context.Context) (*Permit, error) { return m.acquire(ctx, false) }

// TryAcquire takes a permit only if one is free now (else ErrConflict).
func (m *Semaphore) TryAcquire(ctx context.Context) (*Permit, error) { return m.acquire(ctx, true) }

func (m *Semaphore) acquire(ctx context.Context, try bool) (*Permit, error) {
	if err := m.s.Err(); err != nil {
		return nil, err
	}
	owner := randomOwner() // one owner per permit: two permits of a process are two holders
	c := m.s.c
	req := &wire.Request{Op: wire.OpAcquire, Path: m.path, Mode: wire.Shared, Permits: m.permits, Lease: m.s.lease,
		TTL: millis(m.s.ttl), Wait: waitFor(ctx, try), Owner: owner}
	m.opts.apply(req)
	resp, err := c.park(ctx, m.s, req, nil, releaser{c, m.s.lease, owner})
	if err != nil {
		return nil, err
	}
	p := &Permit{sem: m, owner: owner, token: resp.Token}
	p.life.start(m.s)
	m.s.held.add(m.path, p.token, p)
	return p, nil
}

// holdLost implements heldHold: the service ended the permit.
func (p *Permit) holdLost(_ uint64, cause error) { p.life.end(cause) }

// Context returns a context that ends when the permit ends: on Release,
// when the service ends it (its cause is then a *HoldLostError), or when
// the session ends.
func (p *Permit) Context() context.Context { return p.life.context() }

// IsHeld reports whether the permit is held, as far as the client knows
// (released, lost and session-ended permits are not).
func (p *Permit) IsHeld() bool { return p.life.held() }

// Token returns the permit's fencing token.
func (p *Permit) Token() uint64 { return p.token }

// Path returns the semaphore's path.
func (p *Permit) Path() string { return p.sem.path }

// Release gives the permit back (the next waiter gets it in the same step).
// A permit the service has already ended answers an error matching
// ErrNotHolder or ErrStaleToken (and ErrHoldLost when the client was told).
func (p *Permit) Release(ctx context.Context) error {
	if err := p.life.err(); err != nil && errors.Is(err, ErrHoldLost) {
		return fmt.Errorf("%w: %w", notHeld(p.sem.path), err)
	}
	err := p.sem.s.c.release(ctx, p.sem.path, p.token, p.sem.s.lease, p.owner)
	if err == nil || errors.Is(err, ErrNotHolder) || errors.Is(err, ErrStaleToken) || errors.Is(err, ErrSessionExpired) {
		p.sem.s.held.remove(p.sem.path, p.token, p)
		p.life.end(ErrReleased)
	}
	return err
}
