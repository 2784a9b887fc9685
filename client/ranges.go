package client

import (
	"context"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/wardenlock/warden/wire"
)

// RangeRow is one range as OpRangeList reports it.
type RangeRow struct {
	Start  string `msgpack:"start"` // raw key ("" = the start of the key space)
	End    string `msgpack:"end"`   // raw key ("" = unbounded)
	Shard  uint64 `msgpack:"shard"`
	Gen    uint64 `msgpack:"gen"`
	Ops    uint64 `msgpack:"ops"`              // ops applied since the answering node's replica started
	Moving string `msgpack:"moving,omitempty"` // the move in flight, if any
}

// RangeList returns the ranges with their shard, generation, load and any
// move in flight.
func (c *Client) RangeList(ctx context.Context) ([]RangeRow, error) {
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpRangeList}, c.cfg.requestTimeout)
	if err != nil {
		return nil, err
	}
	var rows []RangeRow
	if err := msgpack.Unmarshal(resp.Value, &rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// SplitRange splits the range holding a namespace so that a new range
// starts at it. pathOrKey is a path at or below the namespace depth, or a
// raw 8-byte route key.
func (c *Client) SplitRange(ctx context.Context, pathOrKey string) error {
	req := &wire.Request{Op: wire.OpRangeSplit}
	if len(pathOrKey) > 0 && pathOrKey[0] == '/' {
		req.Path = pathOrKey
	} else {
		req.Value = []byte(pathOrKey)
	}
	_, err := c.call(ctx, req, c.cfg.requestTimeout)
	return err
}

// MergeRange merges the range starting at start with the next range (both
// must be on the same shard).
func (c *Client) MergeRange(ctx context.Context, start string) error {
	_, err := c.call(ctx, &wire.Request{Op: wire.OpRangeMerge, Value: []byte(start)}, c.cfg.requestTimeout)
	return err
}

// MoveRange starts moving the range starting at start to shard and returns
// the move's id. The move runs in the background (RangeList shows it).
func (c *Client) MoveRange(ctx context.Context, start string, shard uint64) (uint64, error) {
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpRangeMove, Value: []byte(start), Shard: shard}, c.cfg.requestTimeout)
	if err != nil {
		return 0, err
	}
	return resp.Token, nil
}
