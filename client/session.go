package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wardenlock/warden/wire"
)

// SessionState is the client's view of a session's lease, in the vocabulary
// of Apache Curator.
type SessionState int32

const (
	// Connected: the last keepalive was acknowledged and the local deadline
	// has not passed. Locks held by the session are safe to act on.
	Connected SessionState = iota + 1
	// Suspended: the latest keepalive failed or is overdue. The lease may
	// still be alive; stop acting on what the session holds until it is
	// Connected again (or use fencing tokens, which stay safe).
	Suspended
	// Lost: the lease is gone, either reported by the service or because its
	// TTL ran out locally, counted from the send time of the last
	// acknowledged keepalive. Terminal.
	Lost
	// Closed: the session was closed by Session.Close or Client.Close.
	// Terminal.
	Closed
)

func (s SessionState) String() string {
	switch s {
	case Connected:
		return "connected"
	case Suspended:
		return "suspended"
	case Lost:
		return "lost"
	case Closed:
		return "closed"
	}
	return fmt.Sprintf("SessionState(%d)", int32(s))
}

// ErrSessionClosed is the cause of a closed session's context. It also
// matches ErrSessionExpired, so code that checks for a gone lease needs only
// that one.
var ErrSessionClosed = fmt.Errorf("client: session closed: %w", ErrSessionExpired)

// stateBuffer is the capacity of Session.States.
const stateBuffer = 8

// Session is a lease kept alive by the client: the owner of the locks,
// waiters, elections and ephemeral keys made through it. When its lease is
// lost they are all gone, and Done is closed.
type Session struct {
	c      *Client
	lease  uint64
	ttl    time.Duration
	clock  clock
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once the session has ended
	states chan SessionState
	ka     keepAliveState // the client's keepalive scheduler owns it (keepalive.go)
	// The send time of the last acknowledged keepalive, after base (the
	// first one's): read by every Err, twice per lock cycle, without a
	// lock.
	base    time.Time
	lastAck atomic.Int64 // nanoseconds after base

	mu       sync.Mutex
	state    SessionState
	stopOnce sync.Once

	held heldSet // the session's holds, told when the service ends one (held.go)
}

// NewSession starts a session: it picks a random lease key (the lease id is
// derived from it, wire.LeaseID, and the key proves the id to each shard
// that meets the lease first; it never leaves the client otherwise), sends the first
// keepalive (which makes the lease known to the service) and then keeps it
// alive every TTL/3 until Close, Client.Close, or loss.
func (c *Client) NewSession(ctx context.Context, opts ...SessionOption) (*Session, error) {
	cfg := sessionConfig{ttl: DefaultSessionTTL}
	for _, o := range opts {
		o(&cfg)
	}
	if err := c.cfg.ttlLimits.check(cfg.ttl); err != nil {
		return nil, fmt.Errorf("client: new session: %w", err)
	}
	key, lease := newLeaseKey()
	s := &Session{c: c, lease: lease, ttl: cfg.ttl, clock: c.cfg.clock,
		done: make(chan struct{}), states: make(chan SessionState, stateBuffer)}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	c.cfg.leaseKeys.add(lease, key)
	sent := s.clock.Now()
	resp, err := c.call(ctx, s.keepAliveRequest(), c.cfg.requestTimeout)
	if err == nil && slices.Contains(resp.Leases, s.lease) {
		err = wire.Errorf(wire.SessionExpired, "lease %x refused at creation", s.lease)
	}
	if err != nil {
		c.cfg.leaseKeys.remove(lease)
		s.cancel(err)
		return nil, fmt.Errorf("client: new session: %w", err)
	}
	if err := c.track(s); err != nil {
		c.cfg.leaseKeys.remove(lease)
		s.cancel(err)
		return nil, err
	}
	s.base = sent
	s.setState(Connected)
	c.keepAlives.add(s, sent)
	return s, nil
}

// Lease returns the session's lease id.
func (s *Session) Lease() uint64 { return s.lease }

// TTL returns the session's lease TTL.
func (s *Session) TTL() time.Duration { return s.ttl }

// Client returns the client the session belongs to.
func (s *Session) Client() *Client { return s.c }

// State returns the current state.
func (s *Session) State() SessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// States returns a channel that receives every state change (the first
// value, Connected, is already in it). Sends never block the session: the
// channel holds the 8 most recent changes, and when the reader falls behind
// the oldest are dropped, so the last value received is always the current
// state. The channel is closed after the terminal Lost or Closed state. There
// is one channel per session: use it from one reader.
func (s *Session) States() <-chan SessionState { return s.states }

// Done is closed when the session ends (Lost or Closed).
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Context returns a context cancelled when the session ends; its
// context.Cause says why (it matches ErrSessionExpired).
func (s *Session) Context() context.Context { return s.ctx }

// Err returns nil while the session lives, and why it ended afterwards.
// A session whose local deadline (last acknowledged keepalive's send time
// + TTL) has passed is not live, even in the moment before its keepalive
// loop has run and ended it: a starved or paused process must not act on
// a lease the service may already have ended.
func (s *Session) Err() error {
	if s.ctx.Err() == nil {
		if s.untilDeadline() > 0 {
			return nil
		}
		return wire.Errorf(wire.SessionExpired, "lease %x: no keepalive acknowledged within its TTL of %s", s.lease, s.ttl)
	}
	return context.Cause(s.ctx)
}

// Close ends the session: it stops the keepalives and revokes the lease,
// which releases every lock, waiter, election candidacy and ephemeral key of
// the session at once. Closing a lost session returns nil. If the revoke
// cannot be confirmed before ctx ends the lease simply expires after its TTL.
func (s *Session) Close(ctx context.Context) error {
	if s.ctx.Err() != nil {
		return nil
	}
	s.stop(Closed, ErrSessionClosed)
	if s.State() != Closed {
		return nil // it was lost first
	}
	req := &wire.Request{Op: wire.OpRevoke, Lease: s.lease, Client: s.c.id, Seq: s.c.seqs.begin()}
	defer s.c.seqs.end(req.Seq)
	_, err := s.c.call(ctx, req, s.c.cfg.requestTimeout)
	if errors.Is(err, ErrSessionExpired) || errors.Is(err, ErrNotFound) {
		err = nil
	}
	return err
}

// stop takes the session off the keepalive schedule and moves it to the
// terminal state st (unless it already ended).
func (s *Session) stop(st SessionState, cause error) {
	s.stopOnce.Do(func() {
		if s.c.keepAlives.stop(s) {
			s.end(st, cause)
		}
	})
	<-s.done
}

func (s *Session) keepAliveRequest() *wire.Request {
	return &wire.Request{Op: wire.OpKeepAlive, Lease: s.lease, TTL: millis(s.ttl)}
}

func (s *Session) acked(sent time.Time) {
	at := int64(sent.Sub(s.base))
	for {
		last := s.lastAck.Load()
		if at <= last || s.lastAck.CompareAndSwap(last, at) {
			return
		}
	}
}

// untilDeadline is the time left before the local deadline.
func (s *Session) untilDeadline() time.Duration {
	return time.Duration(s.lastAck.Load()) + s.ttl - s.clock.Now().Sub(s.base)
}

// setState records a non-terminal state and publishes a change.
func (s *Session) setState(st SessionState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setStateLocked(st)
}

func (s *Session) setStateLocked(st SessionState) {
	if s.state == st || s.state == Lost || s.state == Closed {
		return
	}
	if st == Suspended && s.state == Connected {
		s.c.cfg.logger.Info("warden: session suspended", "lease", wire.HexID(s.lease))
	}
	s.state = st
	for {
		select {
		case s.states <- st:
			return
		default:
		}
		select { // full: drop the oldest change
		case <-s.states:
		default:
		}
	}
}

// end moves to a terminal state, cancels the context and closes States.
// It runs once per session: whoever marks the schedule's state ended calls it.
func (s *Session) end(st SessionState, cause error) {
	s.cancel(cause) // before publishing: whoever sees Lost finds Done closed
	s.mu.Lock()
	if s.state != Lost && s.state != Closed {
		s.setStateLocked(st)
		close(s.states)
		if st == Lost {
			s.c.cfg.logger.Warn("warden: session lost", "lease", wire.HexID(s.lease), "cause", cause)
		}
	}
	s.mu.Unlock()
	s.c.untrack(s)
	close(s.done)
}

// once sends req on one connection, one attempt, no retry: for callers that
// run their own retry schedule (keepalives).
func (c *Client) once(ctx context.Context, req *wire.Request, timeout time.Duration) (*wire.Response, error) {
	if c.ctx.Err() != nil {
		return nil, ErrClientClosed
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cn, err := c.pool.pick(pctx)
	if err != nil {
		return nil, err
	}
	resp, _, err := cn.roundTrip(ctx, req, timeout)
	if err != nil {
		return nil, err
	}
	return resp, resp.AsError()
}
