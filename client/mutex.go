package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/wardenlock/warden/wire"
)

// hold is one lock path held (or not) by one owner of a session, in one
// mode. A gate (a one-slot channel, so waiting on it honours contexts)
// orders the goroutines of this process: an exclusive hold keeps the gate
// from Lock to Unlock, like sync.Mutex; a shared hold keeps it only while it
// talks to the service and counts its local holders, so one grant serves
// them all.
//
// A worker that cycles over many locks finds each one cold in the cache:
// the fields every Lock and Unlock touch come first and together, and
// what their requests carry from the options is worked out once.
type hold struct {
	s         *Session
	gate      chan struct{}
	mode      wire.Mode
	flags     uint32 // request flags from the options (signed, revocable)
	lockDelay int64  // from WithLockDelay
	path      string
	owner     string
	route     routeCache // where the path's requests go

	mu    sync.Mutex
	count int // local holders (exclusive: 0 or 1)
	token uint64
	// ended says why the hold ended while it had no context. The hold's
	// context is made on first use (Mutex.Context): most holders never
	// ask, and two contexts per lock cycle were a tenth of a load
	// generator's CPU.
	ended  error
	grant  *wire.SignedGrant // the grant's signature, when asked for
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// ErrReleased is the cause of a hold's context once the holder gave it back
// (Unlock, Release, Resign, HandOver), and before its first grant.
var ErrReleased = errors.New("client: hold released")

// init makes h a hold of path by owner; its acquires carry cfg's options
// (a signed grant only when signed).
func (h *hold) init(s *Session, path, owner string, mode wire.Mode, cfg lockConfig, signed bool) {
	cfg.signed = signed
	var req wire.Request
	cfg.apply(&req)
	*h = hold{s: s, gate: make(chan struct{}, 1), mode: mode, flags: req.Flags, lockDelay: req.LockDelay,
		path: path, owner: owner, ended: ErrReleased}
}

// randomOwner makes an owner name unique to one hold: a random id in hex,
// a dash and six base32 characters (about 94 random bits in all).
func randomOwner() string {
	const base32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b := make([]byte, 0, 16+1+6)
	b = strconv.AppendUint(b, randomID(), 16)
	b = append(b, '-')
	r := randomID()
	for range 6 {
		b = append(b, base32[r&31])
		r >>= 5
	}
	return string(b)
}

func (h *hold) enter(ctx context.Context, try bool) error {
	// A free gate is taken without a two-way select, which would lock
	// ctx's Done channel too.
	select {
	case h.gate <- struct{}{}:
		return nil
	default:
	}
	if try {
		return wire.Errorf(wire.Conflict, "%s is held by this process", h.path)
	}
	select {
	case h.gate <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *hold) leave() { <-h.gate }

func (h *hold) lock(ctx context.Context, try bool) error {
	if err := h.s.Err(); err != nil {
		return err
	}
	if err := h.enter(ctx, try); err != nil {
		return err
	}
	if h.mode == wire.Shared {
		h.mu.Lock()
		if h.count > 0 {
			h.count++
			h.mu.Unlock()
			h.leave()
			return nil
		}
		h.mu.Unlock()
	}
	c := h.s.c
	req := &wire.Request{Op: wire.OpAcquire, Path: h.path, Mode: h.mode, Lease: h.s.lease,
		TTL: millis(h.s.ttl), Wait: waitFor(ctx, try), Owner: h.owner, Flags: h.flags, LockDelay: h.lockDelay}
	resp, err := c.park(ctx, h.s, req, &h.route, h)
	if err != nil {
		h.leave()
		return err
	}
	token := resp.Token
	h.mu.Lock()
	h.token, h.count, h.ended = token, 1, nil
	if h.grant != nil || resp.Signed != nil {
		h.grant = resp.Signed
	}
	if h.ctx != nil {
		h.ctx, h.cancel = nil, nil // made by context() when asked for
	}
	h.mu.Unlock()
	recycle(resp)
	if h.mode == wire.Shared {
		h.leave()
	}
	h.s.held.add(h.path, token, h)
	return nil
}

// undo implements undoer: a grant this hold did not keep is released.
func (h *hold) undo(ctx context.Context, path string, token uint64) error {
	return h.s.c.release(ctx, path, token, h.s.lease, h.owner)
}

// holdLost implements heldHold: the service ended the hold of token.
func (h *hold) holdLost(token uint64, cause error) { h.dropped(token, cause) }

func (h *hold) unlock(ctx context.Context) error {
	if h.mode == wire.Shared {
		if err := h.enter(ctx, false); err != nil {
			return err
		}
		defer h.leave()
	}
	h.mu.Lock()
	if h.count == 0 {
		ended := h.ended
		if h.ctx != nil {
			ended = context.Cause(h.ctx)
		}
		h.mu.Unlock()
		if errors.Is(ended, ErrHoldLost) {
			return fmt.Errorf("%w: %w", notHeld(h.path), ended)
		}
		return notHeld(h.path)
	}
	if h.count > 1 {
		h.count--
		h.mu.Unlock()
		return nil
	}
	token := h.token
	h.mu.Unlock()
	if err := h.s.Err(); err != nil {
		h.dropped(token, err)
		return err
	}
	err := h.s.c.releaseVia(ctx, &h.route, h.path, token, h.s.lease, h.owner)
	if err != nil && !errors.Is(err, ErrNotHolder) && !errors.Is(err, ErrStaleToken) && !errors.Is(err, ErrSessionExpired) {
		return err // not confirmed: still held, Unlock may be called again
	}
	h.dropped(token, ErrReleased)
	return err
}

// dropped forgets the hold of token once the service no longer has it.
func (h *hold) dropped(token uint64, cause error) {
	h.s.held.remove(h.path, token, h)
	h.mu.Lock()
	if h.token != token {
		h.mu.Unlock()
		return
	}
	wasHeld := h.count > 0
	h.token, h.count = 0, 0
	if h.cancel != nil {
		h.cancel(cause)
	} else {
		h.ended = cause
	}
	h.mu.Unlock()
	if wasHeld && h.mode == wire.Exclusive {
		h.leave()
	}
}

func (h *hold) currentToken() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.token
}

func (h *hold) held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count > 0 && h.s.Err() == nil
}

func (h *hold) context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil {
		if h.count > 0 {
			h.ctx, h.cancel = context.WithCancelCause(h.s.ctx) // ends with the session
		} else {
			h.ctx, h.cancel = context.WithCancelCause(context.Background())
			h.cancel(h.ended)
		}
	}
	return h.ctx
}

// Mutex is a distributed lock owned by a session. Lock blocks until the lock
// is granted or ctx ends; the grant comes with a fencing token that strictly
// increases across every grant of the path, to be passed to whatever the lock
// protects. Like sync.Mutex, a Mutex is not reentrant: a second Lock waits
// for Unlock. It is safe for concurrent use.
type Mutex struct {
	h hold
}

func lockConfigOf(opts []LockOption) lockConfig {
	var cfg lockConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.owner == "" {
		cfg.owner = randomOwner()
	}
	return cfg
}

// NewMutex returns a Mutex on path (exclusive, or shared with WithShared)
// owned by session s. It does not talk to the service.
func NewMutex(s *Session, path string, opts ...LockOption) *Mutex {
	cfg := lockConfigOf(opts)
	m := &Mutex{}
	m.h.init(s, path, cfg.owner, cfg.mode, cfg, cfg.signed)
	return m
}

// Signed returns the signature of the current grant, made when the Mutex was
// created WithSignedToken and the cluster has a signing key (nil otherwise).
// A resource verifies it offline with the cluster's public key (package
// fence: fence.FromGrant(m.Path(), m.Token(), m.Signed())).
func (m *Mutex) Signed() *wire.SignedGrant {
	m.h.mu.Lock()
	defer m.h.mu.Unlock()
	return m.h.grant
}

// Lock acquires the lock, waiting in the service's FIFO queue until it is
// granted, ctx ends or the session ends. The remaining time of ctx's deadline
// is sent as the server-side wait. When ctx ends first the queued request is
// withdrawn (a grant that raced with the withdrawal is given back), and the
// error is ctx's error (matching ErrAmbiguous too when the withdrawal could
// not be confirmed: the client finishes it in the background); when the
// session ends, or the grant arrives after the session's local deadline, it
// matches ErrSessionExpired. After any error nothing is held. The package
// doc lists every error with the caller's state after it.
func (m *Mutex) Lock(ctx context.Context) error { return m.h.lock(ctx, false) }

// TryLock acquires the lock only if it is free now, and fails with an error
// matching ErrConflict otherwise (ErrLockDelayed during the path's
// lock-delay); its other errors are Lock's.
func (m *Mutex) TryLock(ctx context.Context) error { return m.h.lock(ctx, true) }

// Unlock releases the lock by its token. If the service has already ended
// the hold (session lost, lock revoked) the error says so (ErrSessionExpired,
// ErrNotHolder or ErrStaleToken, and ErrHoldLost when the client was told)
// and the Mutex is unlocked. If the release cannot be confirmed
// (ErrAmbiguous, ctx ended) the Mutex stays locked and Unlock may be called
// again: a repeated release by token never frees a later holder.
func (m *Mutex) Unlock(ctx context.Context) error { return m.h.unlock(ctx) }

// Token returns the fencing token of the current hold, or 0.
func (m *Mutex) Token() uint64 { return m.h.currentToken() }

// IsHeld reports whether this Mutex holds the lock and its session is alive
// by the client's clock. The service tells the client when it ends a hold
// (within one keepalive interval at worst), but until that notice arrives
// IsHeld cannot know: protect resources with Token, not with IsHeld.
func (m *Mutex) IsHeld() bool { return m.h.held() }

// Context returns a context that is cancelled when the hold ends, with the
// reason as its context.Cause: ErrReleased on Unlock, a *HoldLostError when
// the service ended the hold (revoked at its deadline, released, resigned
// or handed over by someone else), the session's cause (matching
// ErrSessionExpired) when the session ended. Before the first Lock it is
// already cancelled.
func (m *Mutex) Context() context.Context { return m.h.context() }

// Path returns the locked path.
func (m *Mutex) Path() string { return m.h.path }

// RevokeRequests delivers the service's requests to revoke the current hold
// (an admin's, or a waiter's if the Mutex was made WithRevocable), until ctx
// ends. Release before the request's Deadline, or the service revokes the
// lock then (and the token stops being accepted by fenced resources).
func (m *Mutex) RevokeRequests(ctx context.Context) <-chan RevokeRequest {
	return m.h.s.c.RevokeRequests(ctx, m.h.path, m.Token())
}

// RWMutex is a readers-writer lock on one path owned by a session: Lock
// takes it exclusively, RLock shared. Readers of one RWMutex share a single
// shared grant. Readers and the writer use distinct owners (owner+"/r",
// owner+"/w"), so they exclude each other in the service exactly as holders in
// other processes do; as with sync.RWMutex, a goroutine holding RLock that
// calls Lock waits forever (here: until ctx ends).
type RWMutex struct {
	r, w *hold
}

// NewRWMutex returns an RWMutex on path owned by session s.
func NewRWMutex(s *Session, path string, opts ...LockOption) *RWMutex {
	cfg := lockConfigOf(opts)
	rw := &RWMutex{r: new(hold), w: new(hold)}
	rw.r.init(s, path, cfg.owner+"/r", wire.Shared, cfg, false)
	rw.w.init(s, path, cfg.owner+"/w", wire.Exclusive, cfg, false)
	return rw
}

// Lock acquires the lock exclusively; see Mutex.Lock.
func (rw *RWMutex) Lock(ctx context.Context) error { return rw.w.lock(ctx, false) }

// TryLock acquires the lock exclusively if it is free now (else ErrConflict).
func (rw *RWMutex) TryLock(ctx context.Context) error { return rw.w.lock(ctx, true) }

// Unlock releases the exclusive hold; see Mutex.Unlock.
func (rw *RWMutex) Unlock(ctx context.Context) error { return rw.w.unlock(ctx) }

// RLock acquires the lock shared, waiting like Lock.
func (rw *RWMutex) RLock(ctx context.Context) error { return rw.r.lock(ctx, false) }

// TryRLock acquires the lock shared if that is possible now (else
// ErrConflict).
func (rw *RWMutex) TryRLock(ctx context.Context) error { return rw.r.lock(ctx, true) }

// RUnlock gives up one reader's hold; the last one releases the shared grant.
func (rw *RWMutex) RUnlock(ctx context.Context) error { return rw.r.unlock(ctx) }

// Token returns the fencing token of the exclusive hold, or 0.
func (rw *RWMutex) Token() uint64 { return rw.w.currentToken() }

// RToken returns the fencing token of the shared grant, or 0.
func (rw *RWMutex) RToken() uint64 { return rw.r.currentToken() }

// Context returns a context cancelled when the exclusive hold ends.
func (rw *RWMutex) Context() context.Context { return rw.w.context() }

// RContext returns a context cancelled when the shared grant ends.
func (rw *RWMutex) RContext() context.Context { return rw.r.context() }
