package client

import (
	"context"
	"encoding/json"

	"github.com/wardenlock/warden/wire"
)

// Operator calls for machines (they need the admin permission when the
// cluster has an auth policy). The node that answers proposes the change to
// the meta group; the placement rounds carry it out in the background.

// NodeActivate marks a node active: it may receive replicas and shard
// leaderships again (undoes a drain).
func (c *Client) NodeActivate(ctx context.Context, node uint64) error {
	return c.nodeAdmin(ctx, "activate", node)
}

// NodeDrain marks a node draining: every replica it holds is moved to
// other nodes, and its shard leaderships handed over. Watch Shards for the
// progress.
func (c *Client) NodeDrain(ctx context.Context, node uint64) error {
	return c.nodeAdmin(ctx, "drain", node)
}

// NodeRemove takes a drained node (one holding no replica) out of the
// cluster and of the meta group. Stop its process afterwards.
func (c *Client) NodeRemove(ctx context.Context, node uint64) error {
	return c.nodeAdmin(ctx, "remove", node)
}

func (c *Client) nodeAdmin(ctx context.Context, action string, node uint64) error {
	b, _ := json.Marshal(map[string]any{"action": action, "node": node})
	_, err := c.call(ctx, &wire.Request{Op: wire.OpNodeAdmin, Path: "/", Value: b}, c.cfg.requestTimeout)
	return err
}

// MoveReplica starts moving shard's replica from node `from` to node `to`
// (a non-voting member first, promoted once caught up, then the old replica
// is removed).
func (c *Client) MoveReplica(ctx context.Context, shard, from, to uint64) error {
	b, _ := json.Marshal(map[string]any{"shard": shard, "from": from, "to": to})
	_, err := c.call(ctx, &wire.Request{Op: wire.OpReplicaMove, Path: "/", Value: b}, c.cfg.requestTimeout)
	return err
}

// AbortReplicaMove rolls back shard's replica move while its target is not
// yet a voter.
func (c *Client) AbortReplicaMove(ctx context.Context, shard uint64) error {
	b, _ := json.Marshal(map[string]any{"shard": shard, "abort": true})
	_, err := c.call(ctx, &wire.Request{Op: wire.OpReplicaMove, Path: "/", Value: b}, c.cfg.requestTimeout)
	return err
}

// TransferLeader asks shard's Raft group to hand its leadership to the
// replica on node (a voter; not a draining node). It returns once the
// transfer has started on a replica of the shard; the new leader is
// elected a few heartbeats later (Shards shows it). The leader balancer
// leaves a fresh leadership alone for a while, then may move it again if
// the spread over nodes calls for it.
func (c *Client) TransferLeader(ctx context.Context, shard, node uint64) error {
	b, _ := json.Marshal(map[string]any{"shard": shard, "node": node})
	_, err := c.call(ctx, &wire.Request{Op: wire.OpShardTransfer, Path: "/", Value: b}, c.cfg.requestTimeout)
	return err
}

// ShardReplica is one replica in the Shards view.
type ShardReplica struct {
	Node    uint64 `json:"node"`
	RID     uint64 `json:"rid"`
	Role    string `json:"role"` // leader, voter, learner
	Applied uint64 `json:"applied"`
	Error   string `json:"error,omitempty"`
	Leaving bool   `json:"leaving,omitempty"`
}

// ShardView is one data shard across the cluster.
type ShardView struct {
	ID       uint64         `json:"id"`
	Leader   uint64         `json:"leader"`
	Ranges   int            `json:"ranges"`
	Replicas []ShardReplica `json:"replicas"`
	Move     *struct {
		From uint64 `json:"from"`
		To   uint64 `json:"to"`
		Step string `json:"step"`
	} `json:"move,omitempty"`
	// State is where the shard stands: creating, active, retiring,
	// stopping (its replicas are being removed) or retired; Reason is why
	// it was created or retired.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// Shards returns every data shard with its replicas, their roles and
// applied indexes (asked of each node), its leader and any move under way.
func (c *Client) Shards(ctx context.Context) ([]ShardView, error) {
	resp, err := c.call(ctx, &wire.Request{Op: wire.OpShards}, c.cfg.requestTimeout)
	if err != nil {
		return nil, err
	}
	var out []ShardView
	err = json.Unmarshal(resp.Value, &out)
	return out, err
}
