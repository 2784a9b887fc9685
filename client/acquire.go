package client

import (
	"context"
	"errors"
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

// park sends a request that the service may park until it can be granted
// (OpAcquire, OpCampaign) and waits for its final answer. If ctx (or the
// session, when s is not nil) ends first, it withdraws the waiter with
// OpCancel on the same connection and waits for the request's final answer;
// a grant that raced with the withdrawal is given back with undo (release or
// resign), so a caller who gave up never holds anything. The error is then
// ctx's error, or the session's cause.
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
// Tries (WaitNone)
// are never parked and are retried like any other request.
func (c *Client) park(ctx context.Context, s *Session, req *wire.Request, rc *routeCache, undo func(token uint64) error) (*wire.Response, error) {
	if c.cfg.tracer != nil && req.Trace == "" {
		ctx, span := c.startSpan(ctx, req)
		resp, err := c.parkAttempts(ctx, s, req, rc, undo)
		endSpan(span, resp, err)
		return resp, err
	}
	return c.parkAttempts(ctx, s, req, rc, undo)
}

// parkAttempts is park without its span.
func (c *Client) parkAttempts(ctx context.Context, s *Session, req *wire.Request, rc *routeCache, undo func(token uint64) error) (*wire.Response, error) {
	req.Client, req.Seq = c.id, c.seqs.begin()
	defer func() { c.seqs.end(req.Seq) }()
	if req.Wait == wire.WaitNone {
		return c.callVia(ctx, req, c.cfg.requestTimeout, rc)
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
			return nil, c.abandon(cn, id, cl, req, undo, context.Cause(lctx))
		case <-w.sdone: // nil once derived into lctx
			return nil, c.abandon(cn, id, cl, req, undo, context.Cause(s.ctx))
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
			return res.resp, res.resp.AsError()
		}
		if attempt > 0 || res.err == nil {
			w.derive()
			if c.cfg.backoff.Wait(w.lctx, attempt) != nil {
				continue // reported at the top of the loop
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

// abandon withdraws the parked request id on cn and waits for its final
// answer, giving back a grant if one arrives. It returns cause, or an
// ambiguous error when the outcome cannot be learned.
func (c *Client) abandon(cn *conn, id uint64, cl *call, req *wire.Request, undo func(uint64) error, cause error) error {
	ctx, cancel := context.WithTimeout(c.ctx, 2*c.cfg.requestTimeout)
	defer cancel()
	var cancelDone chan result
	_, cc, err := cn.send(&wire.Request{Op: wire.OpCancel, Path: req.Path, Lease: req.Lease,
		Client: req.Client, Seq: req.Seq}, nil, 0)
	if err == nil {
		cancelDone = cc.done
	}
	var token uint64
	for answered := false; !answered; {
		select {
		case res := <-cl.done:
			answered = true
			if res.err != nil && req.Lease == 0 {
				return cause // the connection broke: the server withdraws the wait itself
			}
			if res.err != nil {
				// A session-bound waiter outlives the connection: withdraw it
				// through any connection (the server routes by path).
				r, err := c.call(ctx, &wire.Request{Op: wire.OpCancel, Path: req.Path, Lease: req.Lease,
					Client: req.Client, Seq: req.Seq}, c.cfg.requestTimeout)
				if err != nil {
					return ambiguous(req.Op, cause)
				}
				if r.Code == wire.OK && r.Token != 0 {
					token = r.Token
				}
				break
			}
			if res.resp.Code == wire.OK && res.resp.Token != 0 {
				token = res.resp.Token
			}
		case res := <-cancelDone:
			cancelDone = nil
			if res.err == nil && res.resp.Code == wire.OK && res.resp.Token != 0 {
				token = res.resp.Token // granted before the cancel; the final answer follows
			}
		case <-ctx.Done():
			cn.forget(id)
			if token == 0 {
				c.cfg.logger.Warn("warden: no final answer to a withdrawn wait", "op", req.Op, "path", req.Path)
				return ambiguous(req.Op, cause)
			}
			answered = true
		}
	}
	if token != 0 {
		if err := undo(token); err != nil {
			c.cfg.logger.Warn("warden: could not give back a late grant", "op", req.Op, "path", req.Path,
				"token", token, "err", err)
			return ambiguous(req.Op, errors.Join(cause, err))
		}
	}
	return cause
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
