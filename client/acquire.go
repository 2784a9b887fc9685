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
// (OpAcquire, OpCampaign). If ctx (or the session, when s is not nil) ends
// before the answer, it withdraws the waiter with OpCancel; when the cancel
// reveals that the grant happened anyway, undo gives it back (release or
// resign), so a caller who gave up never holds anything. The error is then
// ctx's error, or the session's cause.
func (c *Client) park(ctx context.Context, s *Session, req *wire.Request, undo func(token uint64) error) (*wire.Response, error) {
	req.Client, req.Seq = c.id, c.seqs.begin()
	defer c.seqs.end(req.Seq)
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if s != nil {
		stop := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
		defer stop()
	}
	timeout := time.Duration(0)
	if req.Wait == wire.WaitNone {
		timeout = c.cfg.requestTimeout
	}
	resp, err := c.call(lctx, req, timeout)
	if lctx.Err() == nil || err == nil {
		return resp, err
	}
	cause := context.Cause(lctx)
	if !errors.Is(err, ErrAmbiguous) {
		return nil, cause // never reached the service
	}
	token, cerr := c.withdraw(req)
	switch {
	case cerr != nil:
		c.cfg.logger.Warn("warden: could not withdraw a waiter", "op", req.Op, "path", req.Path, "err", cerr)
		return nil, ambiguous(req.Op, errors.Join(cause, cerr))
	case token != 0:
		if uerr := undo(token); uerr != nil {
			c.cfg.logger.Warn("warden: could not give back a late grant", "op", req.Op, "path", req.Path, "token", token, "err", uerr)
			return nil, ambiguous(req.Op, errors.Join(cause, uerr))
		}
	}
	return nil, cause
}

// withdraw sends OpCancel for a parked request. It returns the token when the
// request had been granted before the cancel arrived, 0 when it was withdrawn.
func (c *Client) withdraw(req *wire.Request) (uint64, error) {
	ctx, cancel := context.WithTimeout(c.ctx, 2*c.cfg.requestTimeout)
	defer cancel()
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpCancel, Path: req.Path, Lease: req.Lease,
		Client: req.Client, Seq: req.Seq}, c.cfg.requestTimeout)
	switch {
	case err == nil:
		return resp.Token, nil
	case errors.Is(err, ErrCancelled), errors.Is(err, ErrNotFound), errors.Is(err, ErrSessionExpired):
		return 0, nil
	}
	return 0, err
}

// release gives back one hold by token.
func (c *Client) release(ctx context.Context, path string, token, lease uint64, owner string) error {
	req := &wire.Request{Op: wire.OpRelease, Path: path, Token: token, Lease: lease, Owner: owner,
		Client: c.id, Seq: c.seqs.begin()}
	defer c.seqs.end(req.Seq)
	_, err := c.call(ctx, req, c.cfg.requestTimeout)
	return err
}

// undoContext bounds the give-back of a grant that arrived too late.
func (c *Client) undoContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, 2*c.cfg.requestTimeout)
}
