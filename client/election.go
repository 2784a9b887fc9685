package client

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/wardenlock/warden/wire"
)

// LeaderInfo describes an election's leader. The zero value (Token 0) means
// there is none.
type LeaderInfo struct {
	Value []byte // what the leader proclaimed
	Token uint64 // its leadership token: fences like a lock token
	Lease uint64
	Owner string
}

// Election is one candidate in the election at path, owned by a session.
// Candidates are elected in the order they campaigned; the leader stays
// leader until it resigns, hands over, its session ends, or the service
// ends its leadership (an admin's resign or hand-over, a revocation).
type Election struct {
	s     *Session
	path  string
	owner string
	opts  lockConfig

	mu    sync.Mutex
	token uint64
	life  holdLife // the current leadership's
}

// NewElection returns a candidate for the election at path. WithOwner,
// WithPriority, WithRevocable and WithLockDelay apply from opts.
func NewElection(s *Session, path string, opts ...LockOption) *Election {
	cfg := lockConfigOf(opts)
	return &Election{s: s, path: path, owner: cfg.owner, opts: cfg}
}

// Owner returns the candidate's owner name (the name HandOver takes).
func (e *Election) Owner() string { return e.owner }

// HandOver makes the waiting candidate with owner successor the leader, in
// one step: there is no moment without a leader and no other candidate can
// be elected in between. This candidate must lead; afterwards it does not
// (it may campaign again). It fails with ErrNotFound when no such candidate
// is waiting.
func (e *Election) HandOver(ctx context.Context, successor string) error {
	return e.asLeader(ctx, &wire.Request{Op: wire.OpHandOver, Target: successor}, true)
}

// Campaign waits until this candidate is elected, with value as its
// proclamation, or until ctx or the session ends (then the candidacy is
// withdrawn and ctx's error, or one matching ErrSessionExpired, returned:
// see Mutex.Lock for the withdrawal and the package doc for every error).
// Campaigning while leader returns nil at once.
func (e *Election) Campaign(ctx context.Context, value []byte) error {
	if err := e.s.Err(); err != nil {
		return err
	}
	if e.Token() != 0 {
		return nil
	}
	c := e.s.c
	req := &wire.Request{Op: wire.OpCampaign, Path: e.path, Lease: e.s.lease, TTL: millis(e.s.ttl),
		Owner: e.owner, Value: value, Wait: waitFor(ctx, false)}
	e.opts.apply(req)
	resp, err := c.park(ctx, e.s, req, nil, e)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.token = resp.Token
	e.mu.Unlock()
	e.life.start(e.s)
	e.s.held.add(e.path, resp.Token, e)
	return nil
}

// holdLost implements heldHold: the service ended the leadership.
func (e *Election) holdLost(token uint64, cause error) { e.endLead(token, cause) }

// Context returns a context that ends when this candidate's current
// leadership ends: on Resign or HandOver, when the service ends it (its
// cause is then a *HoldLostError: an admin's resign or hand-over, a
// revocation), or when the session ends. Before the first election it is
// already done.
func (e *Election) Context() context.Context { return e.life.context() }

// Proclaim changes the leader's value without an election. It fails with
// an error matching ErrNotHolder unless this candidate leads.
func (e *Election) Proclaim(ctx context.Context, value []byte) error {
	return e.asLeader(ctx, &wire.Request{Op: wire.OpProclaim, Value: value}, false)
}

// Resign gives up leadership (the next candidate is elected). Resigning when
// not leader fails with an error matching ErrNotHolder.
func (e *Election) Resign(ctx context.Context) error {
	return e.asLeader(ctx, &wire.Request{Op: wire.OpResign}, true)
}

// asLeader sends req (its op and own fields set) on behalf of this
// candidate's leadership, naming it by its token. It forgets the leadership
// when the service says it is gone, and also on success when ends (resign,
// hand-over).
func (e *Election) asLeader(ctx context.Context, req *wire.Request, ends bool) error {
	token := e.Token()
	if token == 0 {
		return notHeld("leadership of " + e.path)
	}
	err := e.send(ctx, req, token)
	if err == nil && ends || errors.Is(err, ErrNotHolder) || errors.Is(err, ErrStaleToken) || errors.Is(err, ErrSessionExpired) {
		e.endLead(token, ErrReleased)
	}
	return err
}

// undo implements undoer: a leadership the candidate did not keep is
// resigned.
func (e *Election) undo(ctx context.Context, _ string, token uint64) error {
	return e.resign(ctx, token)
}

func (e *Election) resign(ctx context.Context, token uint64) error {
	return e.send(ctx, &wire.Request{Op: wire.OpResign}, token)
}

// send fills in the leadership's token, path and session and sends req.
func (e *Election) send(ctx context.Context, req *wire.Request, token uint64) error {
	c := e.s.c
	req.Path, req.Token, req.Lease, req.Owner = e.path, token, e.s.lease, e.owner
	req.Client, req.Seq = c.id, c.seqs.begin()
	defer c.seqs.end(req.Seq)
	_, err := c.call(ctx, req, c.cfg.requestTimeout)
	return err
}

// endLead forgets the leadership of token (if it is still the current one)
// and ends its context with cause.
func (e *Election) endLead(token uint64, cause error) {
	e.s.held.remove(e.path, token, e)
	e.mu.Lock()
	current := e.token == token
	if current {
		e.token = 0
	}
	e.mu.Unlock()
	if current {
		e.life.end(cause)
	}
}

// Token returns this candidate's leadership token while it leads (as far as
// the client knows), or 0.
func (e *Election) Token() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.s.Err() != nil {
		return 0
	}
	return e.token
}

// IsLeader reports whether this candidate leads, as far as the client knows.
func (e *Election) IsLeader() bool { return e.Token() != 0 }

// Leader returns the current leader; with no leader the error matches
// ErrNotFound.
func (e *Election) Leader(ctx context.Context) (LeaderInfo, error) {
	return e.s.c.Leader(ctx, e.path)
}

// Observe sends the election's leader each time it changes, starting with
// the current one; LeaderInfo{} (Token 0) means the election has no leader.
// The channel closes when ctx ends.
func (e *Election) Observe(ctx context.Context) <-chan LeaderInfo {
	return e.s.c.Observe(ctx, e.path)
}

// Leader returns the current leader of the election at path; with no leader
// the error matches ErrNotFound.
func (c *Client) Leader(ctx context.Context, path string) (LeaderInfo, error) {
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpLeader, Path: path}, c.cfg.requestTimeout)
	if err != nil {
		return LeaderInfo{}, err
	}
	return LeaderInfo{Value: resp.Value, Token: resp.Token, Lease: resp.Lease, Owner: resp.Owner}, nil
}

// Observe follows the election at path without campaigning: see
// Election.Observe. It watches the path for leader events and reads the
// leader after each, so a burst of changes may be reported as its last state.
func (c *Client) Observe(ctx context.Context, path string) <-chan LeaderInfo {
	out := make(chan LeaderInfo, 1)
	if !c.goBackground(func() { c.observe(ctx, path, out) }) {
		close(out)
	}
	return out
}

func (c *Client) observe(ctx context.Context, path string, out chan<- LeaderInfo) {
	defer close(out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	events := c.Watch(ctx, path)
	var (
		known    LeaderInfo
		started  bool
		failures int
	)
	report := func() bool {
		cur, err := c.Leader(ctx, path)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return ctx.Err() == nil // a failed read: the next event retries
		}
		if started && cur.Token == known.Token && bytes.Equal(cur.Value, known.Value) {
			return true
		}
		select {
		case out <- cur:
			known, started = cur, true
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !report() {
		return
	}
	for {
		select {
		case wr, ok := <-events:
			if !ok {
				return
			}
			if wr.Err != nil { // e.g. compacted: follow again from now
				failures++
				if c.cfg.backoff.Wait(ctx, failures-1) != nil {
					return
				}
				events = c.Watch(ctx, path)
				if !report() {
					return
				}
				continue
			}
			failures = 0
			if leaderChanged(wr.Events) && !report() {
				return
			}
		case <-ctx.Done():
			for range events { // let the watch goroutine finish
			}
			return
		}
	}
}

func leaderChanged(evs []Event) bool {
	for _, e := range evs {
		if e.Kind == wire.EvLeader || e.Kind == wire.EvReleased {
			return true
		}
	}
	return false
}
