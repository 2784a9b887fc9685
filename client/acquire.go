package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/wardenlock/warden/wire"
)

// waitFor sets req.Wait from ctx: WaitNone for a try, otherwise the time
// left before ctx's deadline, or WaitForever when it has none.
func waitFor(ctx context.Context, try bool) int64 {
	if try {
		return wire.WaitNone
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return wire.WaitForever
	}
	return max(1, millis(time.Until(dl)))
}

// undoer gives back one hold a withdrawn or unwanted grant took: a release
// by token, or a resign for a leadership. A Mutex's hold is its own undoer
// (an interface holding a pointer costs a lock cycle no allocation).
type undoer interface {
	undo(ctx context.Context, path string, token uint64) error
}

// releaser gives back holds of lease and owner by release.
type releaser struct {
	c     *Client
	lease uint64
	owner string
}

func (r releaser) undo(ctx context.Context, path string, token uint64) error {
	return r.c.release(ctx, path, token, r.lease, r.owner)
}

// undoFunc is an undoer made of a function.
type undoFunc func(ctx context.Context, path string, token uint64) error

func (f undoFunc) undo(ctx context.Context, path string, token uint64) error {
	return f(ctx, path, token)
}

// park sends a request that the service may park until it can be granted
// (OpAcquire, OpCampaign) and waits for its final answer. If ctx (or the
// session, when s is not nil) ends first, the request is withdrawn
// (withdrawal): the withdrawal's answer is the acquire's fate, and a grant
// it reports is given back with undo (release or resign), so a caller who
// gave up never holds anything. The error is then ctx's error, or the
// session's cause.
//
// A session-bound wait (Lease != 0) outlives its connection: the waiter
// stays queued in the shard, and after a broken connection the request is
// sent again with the same Seq, which re-attaches to it (the shard answers
// Queued, or the grant that happened meanwhile). If the client is gone for
// good its session expires and the waiter with it. A wait without a session
// (Lease == 0) lives on its connection: the server withdraws it when the
// connection breaks, so it is sent again with a new Seq. A wait answered
// Superseded (a stale copy of it, still retried by the router of a broken
// connection, replaced it in the shard) is sent again with the same Seq.
// Tries (WaitNone) are never parked and are retried like any other
// request; one whose outcome is unknown when ctx ends is withdrawn too.
//
// A grant is reported only while the session is alive by the client's
// clock (Session.Err): one that arrives after the session's local deadline
// is given back and the session's error returned.
func (c *Client) park(ctx context.Context, s *Session, req *wire.Request, rc *routeCache, undo undoer) (*wire.Response, error) {
	if c.cfg.tracer != nil && req.Trace == "" {
		ctx, span := c.startSpan(ctx, req)
		resp, err := c.parkAttempts(ctx, s, req, rc, undo)
		endSpan(span, resp, err)
		return resp, err
	}
	return c.parkAttempts(ctx, s, req, rc, undo)
}

// parkAttempts is park without its span.
func (c *Client) parkAttempts(ctx context.Context, s *Session, req *wire.Request, rc *routeCache, undo undoer) (*wire.Response, error) {
	req.Client, req.Seq = c.id, c.seqs.begin()
	wd := newWithdrawal(c, req, undo)
	defer wd.release()
	if req.Wait == wire.WaitNone {
		resp, err := c.callVia(ctx, req, c.cfg.requestTimeout, rc)
		if errors.Is(err, ErrAmbiguous) {
			return nil, wd.run(givenUp(ctx, err))
		}
		return c.granted(s, req, resp, err, undo)
	}
	// The wait ends with ctx or with the session. One context derived from
	// both registers with each parent per acquire (8% of a load
	// generator's CPU), so a first attempt, which is nearly always the
	// only one, waits on both channels; retries derive it (sessionWait).
	w := sessionWait{ctx: ctx, lctx: ctx}
	if s != nil {
		w.s, w.sdone = s, s.ctx.Done()
	}
	defer w.release()
	var lastErr error
	for attempt := 0; ; attempt++ {
		if c.ctx.Err() != nil {
			return nil, ErrClientClosed
		}
		if attempt > 0 {
			w.derive()
		}
		lctx := w.lctx
		if err := w.ended(); err != nil {
			if attempt > 0 {
				// An earlier attempt may have been applied (its answer was
				// lost with its connection, or it queued before a retryable
				// answer): withdraw it.
				return nil, wd.run(joinLast(lastErr, err))
			}
			return nil, joinLast(lastErr, err)
		}
		req.AckSeq = c.seqs.ack()
		if req.Wait != wire.WaitForever {
			req.Wait = waitFor(lctx, false)
		}
		// Straight to the shard leader's node when direct routing knows
		// it (no forwarding hop); the wait is parked there.
		cn, err := c.pick(lctx, req, rc)
		if err != nil {
			if e := w.ended(); e != nil {
				err = e
			}
			if attempt > 0 {
				return nil, wd.run(joinLast(lastErr, err))
			}
			return nil, joinLast(lastErr, err)
		}
		id, cl, err := cn.send(req, nil, 0)
		if err != nil && !transient(err) {
			return nil, err // refused locally (size): never sent
		}
		if err != nil {
			lastErr = err
			continue // the connection broke before the request was queued
		}
		var res result
		select {
		case res = <-cl.done:
			cl.release()
		case <-lctx.Done():
			cn.forget(id)
			return nil, wd.run(context.Cause(lctx))
		case <-w.sdone: // nil once derived into lctx
			cn.forget(id)
			return nil, wd.run(context.Cause(s.ctx))
		}
		if res.err == nil && res.resp.Hint != nil && c.direct != nil {
			c.direct.learn(res.resp.Hint) // a forwarded or NotLeader answer names the leader
		}
		switch {
		case res.err != nil && !transient(res.err):
			return nil, res.err // refused locally: never sent
		case res.err != nil: // connection lost
			lastErr = res.err
			if req.Lease == 0 { // the server withdrew it with the connection
				c.seqs.end(req.Seq)
				req.Seq = c.seqs.begin()
				wd.seq = req.Seq
			}
			c.cfg.logger.Debug("warden: re-sending a wait after a broken connection", "op", req.Op, "path", req.Path)
		case res.resp.Code.Retryable():
			lastErr = res.resp.AsError()
			if c.direct != nil && (res.resp.Code == wire.NotLeader || res.resp.Code == wire.WrongShard || res.resp.Code == wire.RangeMoving) {
				c.direct.stale()
			}
		case res.resp.Code == wire.Superseded:
			// Another copy of this request took its place in the shard: a
			// router still retrying the copy sent before a broken
			// connection. Sending it again (same Seq) takes the place back.
			lastErr = res.resp.AsError()
		default:
			return c.granted(s, req, res.resp, res.resp.AsError(), undo)
		}
		if attempt > 0 || res.err == nil {
			w.derive()
			if c.cfg.backoff.Wait(w.lctx, attempt) != nil {
				continue // reported at the top of the loop
			}
		}
	}
}

// granted vets an acquire's final answer before the caller sees it. A
// grant to a session that has ended by the client's clock is given back
// and reported as the session's end: the service may already have ended
// the lease, or will within its TTL, and nothing may be done under it. A
// wait that ran out in the service (Timeout: the wait sent was the time
// left before ctx's deadline) matches context.DeadlineExceeded too, so
// the caller sees its deadline whichever side noticed it first.
func (c *Client) granted(s *Session, req *wire.Request, resp *wire.Response, err error, undo undoer) (*wire.Response, error) {
	if err != nil {
		if resp != nil && resp.Code == wire.Timeout {
			return resp, fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		return resp, err
	}
	if s == nil {
		return resp, nil
	}
	if serr := s.Err(); serr != nil {
		ctx, cancel := c.undoContext()
		defer cancel()
		for path, token := range grantedHolds(req, resp) {
			if err := undo.undo(ctx, path, token); err != nil {
				c.cfg.logger.Warn("warden: could not give back a grant that arrived after the session ended",
					"path", path, "token", token, "err", err)
			}
		}
		return nil, serr
	}
	return resp, nil
}

// grantedHolds lists the holds an acquire's (or a withdrawal's) answer
// reports, by path and token.
func grantedHolds(req *wire.Request, resp *wire.Response) iter.Seq2[string, uint64] {
	return func(yield func(string, uint64) bool) {
		if resp.Token != 0 && !yield(req.Path, resp.Token) {
			return
		}
		for _, h := range resp.Holders {
			if h.Token != 0 && !yield(h.Path, h.Token) {
				return
			}
		}
	}
}

// sessionWait is the context of a parked request: the caller's, ended
// early by the session's end. Until derive, lctx is the caller's context
// and sdone the session's Done channel, to be waited on too; derive makes
// lctx one context that ends with either.
type sessionWait struct {
	ctx, lctx context.Context
	s         *Session
	sdone     <-chan struct{}
	cancel    context.CancelCauseFunc
	stop      func() bool
}

func (w *sessionWait) derive() {
	if w.s == nil || w.cancel != nil {
		return
	}
	var lctx context.Context
	lctx, w.cancel = context.WithCancelCause(w.ctx)
	s, cancel := w.s, w.cancel
	w.stop = context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	w.lctx, w.sdone = lctx, nil
}

// ended is why the wait must end (nil while it may go on).
func (w *sessionWait) ended() error {
	if w.lctx.Err() != nil {
		return context.Cause(w.lctx)
	}
	if w.sdone != nil && w.s.ctx.Err() != nil {
		return context.Cause(w.s.ctx)
	}
	return nil
}

func (w *sessionWait) release() {
	if w.cancel != nil {
		w.stop()
		w.cancel(nil)
	}
}

// withdrawal learns the fate of an acquire whose caller stopped waiting
// (its context or session ended) or whose answer was lost, and gives back
// whatever it took. It sends OpCancel naming the acquire (its Client, Seq
// and path; a multi-lock's paths, lease and owner): the shard applies the
// cancel through its log and answers with the acquire's final fate (the
// token of a grant, nothing for a dropped waiter, and an acquire it has not
// seen yet is withdrawn ahead of its arrival), so once that answer is in,
// nothing the acquire could still do is unknown. Until then the acquire's
// Seq stays open, so the dedup record the cancel reads is not dropped.
//
// The caller waits for the answer up to the request timeout; if the
// service cannot answer by then (no quorum), the withdrawal goes on in the
// background until it is answered or the client closes, and the caller
// gets an error matching ErrAmbiguous. A hold it turns up is given back as
// soon as it is known; without a quorum nothing can be granted or given
// back, and the session's lease ends the hold at the latest.
//
// It keeps what names the acquire, not the request itself: the caller's
// request then stays on its stack (a lock cycle allocates nothing for it).
type withdrawal struct {
	c           *Client
	op          wire.Op
	path, owner string
	paths       []string
	lease       uint64
	client, seq uint64
	undo        undoer
	background  bool // the background goroutine owns the Seq now
}

func newWithdrawal(c *Client, req *wire.Request, undo undoer) withdrawal {
	return withdrawal{c: c, op: req.Op, path: req.Path, owner: req.Owner, paths: req.Paths, lease: req.Lease,
		client: req.Client, seq: req.Seq, undo: undo}
}

// release ends the acquire's Seq unless the background owns it.
func (wd *withdrawal) release() {
	if !wd.background {
		wd.c.seqs.end(wd.seq)
	}
}

// run withdraws the acquire for a caller whose wait ended with cause, and
// returns the error for that caller.
func (wd *withdrawal) run(cause error) error {
	c := wd.c
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.requestTimeout)
	err := wd.settle(ctx)
	cancel()
	if err == nil {
		return cause
	}
	if c.ctx.Err() != nil {
		return ambiguous(wd.op, cause)
	}
	c.cfg.logger.Warn("warden: withdrawing an acquire in the background", "op", wd.op, "path", wd.path, "err", err)
	bg := *wd
	if c.goBackground(func() {
		defer c.seqs.end(bg.seq)
		for attempt := 0; ; attempt++ {
			if bg.settle(c.ctx) == nil || c.cfg.backoff.Wait(c.ctx, attempt) != nil {
				return
			}
		}
	}) {
		wd.background = true
	}
	return ambiguous(wd.op, cause)
}

// settle sends the withdrawal and gives back what its answer reports held.
// It fails only while the answer is unknown (the service unreachable, no
// quorum): a refusal is final too (nothing more can be learnt by asking
// again), and is logged.
func (wd *withdrawal) settle(ctx context.Context) error {
	c := wd.c
	req := &wire.Request{Op: wire.OpCancel, Path: wd.path, Paths: wd.paths, Lease: wd.lease, Owner: wd.owner,
		Client: wd.client, Seq: wd.seq}
	resp, err := c.call(ctx, req, c.cfg.requestTimeout)
	var we *wire.Error
	switch {
	case errors.Is(err, ErrCancelled) || errors.Is(err, ErrNotFound):
		return nil // withdrawn, or nothing by that number to withdraw: nothing held
	case errors.As(err, &we) && !we.Code.Retryable() && !errors.Is(err, ErrAmbiguous):
		c.cfg.logger.Warn("warden: the withdrawal of an acquire was refused", "op", wd.op, "path", wd.path, "err", err)
		return nil
	case err != nil:
		return err
	}
	for path, token := range grantedHolds(req, resp) {
		err := wd.undo.undo(ctx, path, token)
		if err != nil && !errors.Is(err, ErrNotHolder) && !errors.Is(err, ErrStaleToken) && !errors.Is(err, ErrSessionExpired) {
			return err // not given back yet: the next settle asks again (same answer while it is held)
		}
	}
	return nil
}

// givenUp is the cause to report for a request abandoned when ctx ended:
// ctx's own, or err when ctx has not ended (the client closed).
func givenUp(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

func joinLast(last, err error) error {
	if last == nil || errors.Is(err, last) {
		return err
	}
	return errors.Join(err, last)
}

// release gives back one hold by token.
func (c *Client) release(ctx context.Context, path string, token, lease uint64, owner string) error {
	return c.releaseVia(ctx, nil, path, token, lease, owner)
}

// releaseVia is release for a caller that remembers path's route in rc.
func (c *Client) releaseVia(ctx context.Context, rc *routeCache, path string, token, lease uint64, owner string) error {
	req := &wire.Request{Op: wire.OpRelease, Path: path, Token: token, Lease: lease, Owner: owner,
		Client: c.id, Seq: c.seqs.begin()}
	defer c.seqs.end(req.Seq)
	resp, err := c.callVia(ctx, req, c.cfg.requestTimeout, rc)
	recycle(resp)
	return err
}

// undoContext bounds the give-back of a grant that arrived too late.
func (c *Client) undoContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, 2*c.cfg.requestTimeout)
}
