package client

import (
	"context"

	"github.com/wardenlock/warden/wire"
)

// KV is one key-value entry: Version counts the writes since the key was
// created (1 for the first), Lease is non-zero for an ephemeral key, and
// CreateRev/ModRev are shard revisions.
type KV = wire.KV

// Get reads one key. It fails with an error matching ErrNotFound when the
// key does not exist. Linearizable unless WithStale.
func (c *Client) Get(ctx context.Context, path string, opts ...OpOption) (KV, error) {
	o := applyOps(opts)
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpKVGet, Path: path, Flags: o.flags() & wire.FlagStale},
		c.cfg.requestTimeout)
	if err != nil {
		return KV{}, err
	}
	if len(resp.KVs) == 1 {
		return resp.KVs[0], nil
	}
	return KV{Key: path, Value: resp.Value, Version: resp.Version, Lease: resp.Lease}, nil
}

// Put writes a key and returns its new version. With WithLease(session) the
// key is ephemeral: it is deleted when the session ends.
func (c *Client) Put(ctx context.Context, path string, value []byte, opts ...OpOption) (uint64, error) {
	o := applyOps(opts)
	return c.put(ctx, &wire.Request{Op: wire.OpKVPut, Path: path, Value: value, Lease: o.lease, TTL: millis(o.leaseTTL)})
}

// CAS writes a key only if its current version is expect (0: only if it does
// not exist), and returns the new version. A mismatch fails with an error
// matching ErrVersionMismatch.
func (c *Client) CAS(ctx context.Context, path string, expect uint64, value []byte, opts ...OpOption) (uint64, error) {
	o := applyOps(opts)
	return c.put(ctx, &wire.Request{Op: wire.OpKVPut, Path: path, Value: value, Lease: o.lease, TTL: millis(o.leaseTTL),
		Flags: wire.FlagHasExpect, Version: expect})
}

func (c *Client) put(ctx context.Context, req *wire.Request) (uint64, error) {
	if req.Value == nil {
		req.Value = []byte{}
	}
	req.Client, req.Seq = c.id, c.seqs.begin()
	defer c.seqs.end(req.Seq)
	resp, err := c.call(ctx, req, c.cfg.requestTimeout)
	if err != nil {
		return 0, err
	}
	return resp.Version, nil
}

// Delete removes a key (conditionally with WithExpectVersion). Deleting a
// missing key fails with an error matching ErrNotFound.
func (c *Client) Delete(ctx context.Context, path string, opts ...OpOption) error {
	o := applyOps(opts)
	req := &wire.Request{Op: wire.OpKVDelete, Path: path, Flags: o.flags() & wire.FlagHasExpect,
		Version: o.expect, Client: c.id, Seq: c.seqs.begin()}
	defer c.seqs.end(req.Seq)
	_, err := c.call(ctx, req, c.cfg.requestTimeout)
	return err
}

// List returns the keys under prefix in key order, at most WithLimit(n) of
// them.
func (c *Client) List(ctx context.Context, prefix string, opts ...OpOption) ([]KV, error) {
	o := applyOps(opts)
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpKVList, Path: prefix, Limit: o.limit,
		Flags: wire.FlagPrefix | o.flags()&wire.FlagStale}, c.cfg.requestTimeout)
	if err != nil {
		return nil, err
	}
	return resp.KVs, nil
}
