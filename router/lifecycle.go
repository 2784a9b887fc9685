package router

import (
	"context"
	"encoding/json"
	"time"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// Data shards at runtime: shard.add, shard.retire (admin) and shard.log
// (read), run on the node the client reached (its host proposes to the
// meta group).

// ShardAddArgs is OpShardAdd's Value.
type ShardAddArgs struct {
	Nodes  []uint64 `json:"nodes,omitempty"` // none: the policy places it
	NoFill bool     `json:"no_fill,omitempty"`
}

// ShardAddAnswer is OpShardAdd's answer.
type ShardAddAnswer struct {
	Shard uint64 `json:"shard"`
}

// ShardRetireArgs is OpShardRetire's Value (and its answer).
type ShardRetireArgs struct {
	Shard uint64 `json:"shard"`
}

// ShardLog is OpShardLog's answer: the recorded lifecycle decisions,
// oldest first, and the automatic policy's last reading on the meta
// leader (nil when the policy is off or this node could not ask it).
type ShardLog struct {
	Decisions []DecisionView `json:"decisions"`
	Policy    any            `json:"policy,omitempty"`
}

// DecisionView is one recorded lifecycle decision.
type DecisionView struct {
	Seq    uint64    `json:"seq"`
	At     time.Time `json:"at"`
	Action string    `json:"action"` // create, activate, retire, stop
	Shard  uint64    `json:"shard"`
	Reason string    `json:"reason,omitempty"`
}

// maxShardArgs bounds the JSON argument of a lifecycle op.
const maxShardArgs = 4 << 10

func (s *Server) shardLifecycleOp(ctx context.Context, h Host, req *wire.Request) (any, error) {
	if len(req.Value) > maxShardArgs {
		return nil, wire.Errorf(wire.TooLarge, "%v: argument of %d bytes (at most %d)", req.Op, len(req.Value), maxShardArgs)
	}
	switch req.Op {
	case wire.OpShardAdd:
		var a ShardAddArgs
		if len(req.Value) > 0 {
			if err := json.Unmarshal(req.Value, &a); err != nil {
				return nil, wire.Errorf(wire.InvalidArgument, "shard.add: want {\"nodes\": [ids], \"no_fill\": bool}: %v", err)
			}
		}
		for _, n := range a.Nodes {
			if n == 0 || n > placement.MaxNodeID {
				return nil, wire.Errorf(wire.InvalidArgument, "shard.add: node id %d is outside 1..%d", n, uint64(placement.MaxNodeID))
			}
		}
		if len(a.Nodes) > placement.MaxShardReplicas {
			return nil, wire.Errorf(wire.InvalidArgument, "shard.add: %d nodes named; a shard has at most %d replicas", len(a.Nodes), placement.MaxShardReplicas)
		}
		id, err := h.CreateShard(ctx, a.Nodes, !a.NoFill, "operator: shard.add")
		return ShardAddAnswer{Shard: id}, err
	case wire.OpShardRetire:
		var a ShardRetireArgs
		if err := json.Unmarshal(req.Value, &a); err != nil || a.Shard == 0 {
			return nil, wire.Errorf(wire.InvalidArgument, "shard.retire: want {\"shard\": id} with a positive id")
		}
		return a, h.RetireShard(ctx, a.Shard, "operator: shard.retire")
	case wire.OpShardLog:
		t, err := h.RefreshTable(ctx)
		if err != nil {
			return nil, err
		}
		if t == nil {
			return nil, wire.Errorf(wire.Unavailable, "no range table yet")
		}
		out := ShardLog{Decisions: []DecisionView{}, Policy: s.policyState(ctx, h)}
		for _, d := range t.Decisions {
			out.Decisions = append(out.Decisions, DecisionView{Seq: d.Seq, At: time.UnixMilli(d.At).UTC(),
				Action: d.Action, Shard: d.Shard, Reason: d.Reason})
		}
		return out, nil
	}
	return nil, wire.Errorf(wire.UnknownOp, "not a shard lifecycle operation: %v", req.Op)
}

// retiredViews are the stopping and retired shards: the nodes still to
// remove their replica's data are listed as replicas with role "stopping".
func retiredViews(t *placement.Table) []ShardView {
	var out []ShardView
	for _, r := range t.Retired {
		v := ShardView{ID: r.ID, State: r.State().String(), Reason: r.Reason, Replicas: []ReplicaView{}}
		for _, n := range r.Pending {
			v.Replicas = append(v.Replicas, ReplicaView{Node: n, RID: n, Role: "stopping"})
		}
		out = append(out, v)
	}
	return out
}

// policyState is the automatic shard policy's last reading: this node's
// when it ran here, else the meta leader's (the policy runs there), asked
// over the forwarding connection; nil when neither has one.
func (s *Server) policyState(ctx context.Context, h Host) any {
	if st := h.ShardPolicyState(); st != nil {
		return st
	}
	t := h.Table()
	lead := h.Leader(placement.MetaShard)
	if t == nil || lead == 0 || lead == h.NodeID() {
		return nil
	}
	n, ok := t.Node(lead)
	if !ok || n.ClientAddr == "" {
		return nil
	}
	p, err := s.peers.get(n.ClientAddr)
	if err != nil {
		return nil
	}
	ch := make(chan *wire.Response, 1)
	p.send(&wire.Request{Op: wire.OpShardLog, Path: "/"}, func(r *wire.Response) { ch <- r })
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	select {
	case r := <-ch:
		var log struct {
			Policy json.RawMessage `json:"policy"`
		}
		if r.Code != wire.OK || json.Unmarshal(r.Value, &log) != nil || len(log.Policy) == 0 || string(log.Policy) == "null" {
			return nil
		}
		return log.Policy
	case <-ctx.Done():
		return nil
	}
}

// goneTolerant wraps the answer to one shard's part of a fan-out (a
// keepalive, a prefix list): a failure from a shard that left the table
// meanwhile (retired: its ranges, and with them its locks, keys and the
// leases holding them, moved to other shards first) counts as an empty
// success, so a shard's retirement never fails the clients' keepalives.
// A shard created meanwhile holds nothing until ranges move in, and a
// range move brings its leases along.
func (s *Server) goneTolerant(shardID uint64, add func(*wire.Response)) wire.Answerer {
	return wire.AnswerFunc(func(r *wire.Response) {
		if r.Code != wire.OK && s.shardGone(shardID) {
			r = &wire.Response{ID: r.ID}
		}
		add(r)
	})
}

// shardGone reports whether a data shard has left the table (after a
// refresh): it is not among the shards, and its id was given out.
func (s *Server) shardGone(id uint64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), max(refreshTimeout, s.cfg.DialTimeout))
	defer cancel()
	if s.cache.refresh(ctx) != nil {
		return false
	}
	t := s.cache.table()
	if t == nil {
		return false
	}
	if _, ok := t.Shard(id); ok {
		return false
	}
	return id > placement.MetaShard && id < t.NextShardID()
}
