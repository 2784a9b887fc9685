package client

import (
	"context"
	"encoding/json"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Holder is one holder of a lock; Waiter is one queued request.
type (
	Holder = wire.Holder
	Waiter = wire.Waiter
)

// LockInfo describes one lock path.
type LockInfo struct {
	Path    string
	Holders []Holder
	Waiters []Waiter // in queue order
	// Permits is the permit count when the path is a semaphore (else 0).
	Permits int
	// DelayUntil is when the path's lock-delay ends (zero: none).
	DelayUntil time.Time
	// RevokeAt is the earliest revocation deadline of a holder (zero: none).
	RevokeAt time.Time
}

// LockInfo returns the holders and waiters of path.
func (c *Client) LockInfo(ctx context.Context, path string, opts ...OpOption) (LockInfo, error) {
	o := applyOps(opts)
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpLockInfo, Path: path, Flags: o.flags() & wire.FlagStale},
		c.cfg.requestTimeout)
	if err != nil {
		return LockInfo{}, err
	}
	return LockInfo{Path: path, Holders: resp.Holders, Waiters: resp.Waiters, Permits: int(resp.Permits),
		DelayUntil: unixMilli(resp.DelayUntil), RevokeAt: unixMilli(resp.RevokeAt)}, nil
}

func unixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// ListLocks returns the held locks under prefix, at most WithLimit(n).
func (c *Client) ListLocks(ctx context.Context, prefix string, opts ...OpOption) ([]Holder, error) {
	o := applyOps(opts)
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpListLocks, Path: prefix, Limit: o.limit,
		Flags: wire.FlagPrefix | o.flags()&wire.FlagStale}, c.cfg.requestTimeout)
	if err != nil {
		return nil, err
	}
	return resp.Holders, nil
}

// Status returns the cluster status document (JSON: nodes, shards, leaders).
func (c *Client) Status(ctx context.Context) (json.RawMessage, error) {
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpStatus}, c.cfg.requestTimeout)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(resp.Value), nil
}

// Ranges returns the range table: which shard owns which key interval.
func (c *Client) Ranges(ctx context.Context) ([]wire.Range, error) {
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpRanges}, c.cfg.requestTimeout)
	if err != nil {
		return nil, err
	}
	return resp.Ranges, nil
}
