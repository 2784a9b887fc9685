package client

import (
	"context"
	"encoding/json"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Data shards created and retired at runtime (admin calls; ShardLog needs
// read on "/"). Follow a shard's lifecycle with Shards.

// AddShard records a new data shard on the given nodes (none: the cluster
// chooses the nodes holding the fewest replicas) and returns its id. The
// meta leader starts its Raft group, marks it active once it has a
// leader, and moves ranges into it until it holds its share (unless
// noFill). Unknown nodes fail with ErrNotFound; draining or repeated
// nodes with ErrInvalidArgument.
func (c *Client) AddShard(ctx context.Context, nodes []uint64, noFill bool) (uint64, error) {
	b, _ := json.Marshal(map[string]any{"nodes": nodes, "no_fill": noFill})
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpShardAdd, Path: "/", Value: b}, c.cfg.requestTimeout)
	if err != nil {
		return 0, err
	}
	var a struct {
		Shard uint64 `json:"shard"`
	}
	err = json.Unmarshal(resp.Value, &a)
	return a.Shard, err
}

// RetireShard records a data shard's retirement: its ranges move to the
// other active shards, then its replicas stop and their data is removed.
// A shard still being created is rolled back. An unknown shard fails with
// ErrNotFound; the last active shard, or one already retiring or retired,
// with ErrInvalidArgument.
func (c *Client) RetireShard(ctx context.Context, shard uint64) error {
	b, _ := json.Marshal(map[string]any{"shard": shard})
	_, err := c.call(ctx, &wire.Request{Op: wire.OpShardRetire, Path: "/", Value: b}, c.cfg.requestTimeout)
	return err
}

// ShardDecision is one recorded shard lifecycle decision.
type ShardDecision struct {
	Seq    uint64    `json:"seq"`
	At     time.Time `json:"at"`
	Action string    `json:"action"` // create, activate, retire, stop
	Shard  uint64    `json:"shard"`
	Reason string    `json:"reason,omitempty"`
}

// ShardPolicy is the automatic shard policy's last reading on the meta
// leader.
type ShardPolicy struct {
	At        time.Time          `json:"at"`
	Enabled   bool               `json:"enabled"`
	LeaderOps map[string]float64 `json:"leader_ops"` // node id → ops/s of the shards it leads
	ShardOps  map[string]float64 `json:"shard_ops"`  // shard id → ops/s
	// NodeCPU is each node's CPU use in cores and the cores it may use
	// (node id → reading), for the nodes that measure it.
	NodeCPU map[string]NodeCPU `json:"node_cpu,omitempty"`
	Verdict string             `json:"verdict"`
}

// NodeCPU is one node's CPU use over the last few seconds.
type NodeCPU struct {
	Used     float64 `json:"used"`     // cores
	Capacity float64 `json:"capacity"` // cores its cgroup (or machine) allows
}

// ShardLog is the recorded lifecycle decisions (oldest first, the last
// few dozen) and, when the answering node leads the meta group, the
// policy's last reading.
type ShardLog struct {
	Decisions []ShardDecision `json:"decisions"`
	Policy    *ShardPolicy    `json:"policy,omitempty"`
}

// ShardLog returns the shard lifecycle decisions and the policy's reading.
func (c *Client) ShardLog(ctx context.Context) (ShardLog, error) {
	var out ShardLog
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpShardLog, Path: "/"}, c.cfg.requestTimeout)
	if err != nil {
		return out, err
	}
	err = json.Unmarshal(resp.Value, &out)
	return out, err
}
