package client

import (
	"context"
	"time"

	"github.com/wardenlock/warden/wire"
)

// RevokeRequest tells a holder that the service wants its lock back.
type RevokeRequest struct {
	Path     string
	Token    uint64    // the hold asked for
	Deadline time.Time // when the service revokes it if it is still held
	ByAdmin  bool      // an admin's request (else a waiter's, on a WithRevocable lock)
}

// RevokeLock asks the holder of path (token, or every holder when token is
// 0) to release within grace. The holder hears of it (RevokeRequests); if it
// still holds the lock at the deadline the service revokes it: the lock
// ends, its lock-delay starts, and the next grant's token is higher, so
// fenced resources refuse the old holder. Without the admin permission only
// locks taken WithRevocable can be revoked (else ErrUnauthorized). A second
// request can only bring the deadline forward. grace 0 revokes at once.
func (c *Client) RevokeLock(ctx context.Context, path string, token uint64, grace time.Duration) error {
	return c.revokeLock(ctx, path, token, grace, 0)
}

// ForceRevokeLock is RevokeLock as an admin: it works on any lock, and needs
// the admin permission on the path when the cluster enforces permissions.
func (c *Client) ForceRevokeLock(ctx context.Context, path string, token uint64, grace time.Duration) error {
	return c.revokeLock(ctx, path, token, grace, wire.FlagForce)
}

func (c *Client) revokeLock(ctx context.Context, path string, token uint64, grace time.Duration, flags uint32) error {
	req := &wire.Request{Op: wire.OpRevokeLock, Path: path, Token: token, Grace: grace.Milliseconds(), Flags: flags,
		Client: c.id, Seq: c.seqs.begin()}
	defer c.seqs.end(req.Seq)
	_, err := c.call(ctx, req, c.cfg.requestTimeout)
	return err
}

// RevokeRequests delivers requests to revoke the hold with token on path
// (token 0: any holder's) until ctx ends or that hold ends, then closes the
// channel. A request already pending when it is called is delivered first;
// a request may be delivered more than once.
func (c *Client) RevokeRequests(ctx context.Context, path string, token uint64) <-chan RevokeRequest {
	out := make(chan RevokeRequest, 4)
	run := func() {
		defer close(out)
		send := func(r RevokeRequest) bool {
			select {
			case out <- r:
				return true
			case <-ctx.Done():
				return false
			}
		}
		// Read the pending state first, then follow events from just after
		// it: nothing falls between the two.
		info, err := c.call(ctx, &wire.Request{Op: wire.OpLockInfo, Path: path}, c.cfg.requestTimeout)
		var from uint64
		if err == nil {
			from = info.Rev + 1
			if info.RevokeAt != 0 && (token == 0 || holdsToken(info.Holders, token)) {
				if !send(RevokeRequest{Path: path, Token: token, Deadline: time.UnixMilli(info.RevokeAt)}) {
					return
				}
			}
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		opts := []OpOption{}
		if from > 1 {
			opts = append(opts, WithRev(from))
		}
		for wr := range c.Watch(wctx, path, opts...) {
			if wr.Err != nil {
				return
			}
			for _, ev := range wr.Events {
				switch {
				case ev.Path != path || (token != 0 && ev.Token != token):
				case ev.Kind == wire.EvRevokeRequested:
					if !send(RevokeRequest{Path: path, Token: ev.Token, Deadline: time.UnixMilli(ev.Time + ev.TTL),
						ByAdmin: ev.Cause == wire.CauseAdmin}) {
						return
					}
				case ev.Kind == wire.EvReleased && token != 0:
					return // the hold is over
				}
			}
		}
	}
	if !c.goBackground(run) {
		close(out)
	}
	return out
}

func holdsToken(hs []wire.Holder, token uint64) bool {
	for _, h := range hs {
		if h.Token == token {
			return true
		}
	}
	return false
}
