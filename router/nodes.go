package router

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// Machines: the admin operations that add, drain and remove nodes, move
// replicas and shard leaderships (OpNodeJoin, OpNodeAdmin, OpReplicaMove,
// OpShardTransfer), and the cluster-wide
// shard view (OpShards). They run on the node the client reached; its host
// proposes to the meta group (forwarded to the meta leader by Raft).

// NodeAdminArgs is OpNodeAdmin's Value.
type NodeAdminArgs struct {
	Action string `json:"action"` // activate, drain, remove
	Node   uint64 `json:"node"`
}

// ReplicaMoveArgs is OpReplicaMove's Value.
type ReplicaMoveArgs struct {
	Shard uint64 `json:"shard"`
	From  uint64 `json:"from,omitempty"`
	To    uint64 `json:"to,omitempty"`
	Abort bool   `json:"abort,omitempty"`
}

// ShardTransferArgs is OpShardTransfer's Value (and its answer).
type ShardTransferArgs struct {
	Shard uint64 `json:"shard"`
	Node  uint64 `json:"node"` // the node whose replica is to lead
}

// JoinAnswer is OpNodeJoin's answer.
type JoinAnswer struct {
	MetaRID uint64 `json:"meta_rid"`
}

// ShardView is one data shard across the cluster, as OpShards answers it.
type ShardView struct {
	ID       uint64        `json:"id"`
	Leader   uint64        `json:"leader"` // node id, 0 = unknown
	Ranges   int           `json:"ranges"`
	Replicas []ReplicaView `json:"replicas"`
	Move     *MoveView     `json:"move,omitempty"`
	// State is the shard's lifecycle state (creating, active, retiring,
	// stopping, retired); Reason why it was created or retired.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// ReplicaView is one replica of a shard.
type ReplicaView struct {
	Node    uint64 `json:"node"`
	RID     uint64 `json:"rid"`
	Role    string `json:"role"`              // leader, voter, learner
	Applied uint64 `json:"applied"`           // last applied index, as its node reports it
	Error   string `json:"error,omitempty"`   // its node could not be asked
	Removed bool   `json:"leaving,omitempty"` // the source of the move under way
}

// MoveView is a replica move under way.
type MoveView struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	Step string `json:"step"`
}

func (s *Server) placementOp(req *wire.Request, done func(*wire.Response)) {
	h := s.cfg.Host
	if h == nil || !h.Joined() {
		done(&wire.Response{Code: wire.Unavailable, Msg: "ask a node that is a cluster member (a standalone or joining router holds no meta replica)"})
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		defer cancel()
		v, err := s.runPlacementOp(ctx, h, req)
		if err != nil {
			done(placementError(h, err))
			return
		}
		b, _ := json.Marshal(v)
		done(&wire.Response{Value: b})
	}()
}

func (s *Server) runPlacementOp(ctx context.Context, h Host, req *wire.Request) (any, error) {
	switch req.Op {
	case wire.OpNodeJoin:
		var n placement.Node
		if err := json.Unmarshal(req.Value, &n); err != nil {
			return nil, wire.Errorf(wire.InvalidArgument, "node.join: %v", err)
		}
		rid, err := h.AdmitNode(ctx, n)
		return JoinAnswer{MetaRID: rid}, err
	case wire.OpNodeAdmin:
		var a NodeAdminArgs
		if err := json.Unmarshal(req.Value, &a); err != nil || a.Node == 0 {
			return nil, wire.Errorf(wire.InvalidArgument, "node.admin: want {\"action\", \"node\"}")
		}
		switch a.Action {
		case "activate":
			return a, h.SetNodeState(ctx, a.Node, "")
		case "drain":
			return a, h.SetNodeState(ctx, a.Node, placement.NodeDraining)
		case "remove":
			if a.Node == h.NodeID() {
				// A node cannot see its own removal from the meta group
				// commit (it is no longer replicated to): another does it.
				return a, s.forwardPlacement(ctx, h, req)
			}
			return a, h.RemoveNode(ctx, a.Node)
		}
		return nil, wire.Errorf(wire.InvalidArgument, "node.admin: unknown action %q (activate, drain, remove)", a.Action)
	case wire.OpReplicaMove:
		var a ReplicaMoveArgs
		if err := json.Unmarshal(req.Value, &a); err != nil || a.Shard == 0 {
			return nil, wire.Errorf(wire.InvalidArgument, "replica.move: want {\"shard\", \"from\", \"to\"} or {\"shard\", \"abort\": true}")
		}
		if a.Abort {
			return a, h.AbortMove(ctx, a.Shard)
		}
		_, err := h.MoveReplica(ctx, a.Shard, a.From, a.To)
		return a, err
	case wire.OpShardTransfer:
		var a ShardTransferArgs
		if err := json.Unmarshal(req.Value, &a); err != nil || a.Shard == 0 || a.Node == 0 {
			return nil, wire.Errorf(wire.InvalidArgument, "shard.transfer: want {\"shard\", \"node\"}")
		}
		return a, h.TransferLeadership(ctx, a.Shard, a.Node)
	case wire.OpShards:
		return s.Shards(ctx)
	case wire.OpShardAdd, wire.OpShardRetire, wire.OpShardLog:
		return s.shardLifecycleOp(ctx, h, req) // lifecycle.go
	}
	return nil, wire.Errorf(wire.UnknownOp, "not a placement operation: %v", req.Op)
}

func placementError(h Host, err error) *wire.Response {
	var pe *placement.RefusedError
	var we *wire.Error
	switch {
	case errors.As(err, &pe):
		return &wire.Response{Code: wire.InvalidArgument, Msg: pe.Error()}
	case errors.As(err, &we):
		return &wire.Response{Code: we.Code, Msg: we.Detail}
	}
	return h.ErrorAnswer(err)
}

// Shards asks every registered node for the replicas it hosts (their applied
// index and leadership) and assembles the cluster-wide view of each shard.
func (s *Server) Shards(ctx context.Context) ([]ShardView, error) {
	h := s.cfg.Host
	if h == nil {
		return nil, wire.Errorf(wire.Unavailable, "a standalone router cannot assemble the shard view")
	}
	t, err := h.RefreshTable(ctx)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, wire.Errorf(wire.Unavailable, "no range table yet")
	}
	type key struct{ shard, node uint64 }
	seen := map[key]ShardStatus{}
	failed := map[uint64]string{}
	for _, n := range t.Nodes {
		st, err := s.nodeStatus(ctx, h, n)
		if err != nil {
			failed[n.ID] = err.Error()
			continue
		}
		for _, ss := range st.Shards {
			if ss.Local {
				seen[key{ss.ID, n.ID}] = ss
			}
		}
	}
	var out []ShardView
	for _, si := range t.Shards {
		v := ShardView{ID: si.ID, Ranges: len(t.RangesOf(si.ID)), State: si.State.String(), Reason: si.Reason}
		nodes := append([]uint64(nil), si.Replicas...)
		rids := map[uint64]uint64{}
		for _, n := range si.Replicas {
			rids[n] = si.RID(n)
		}
		m, moving := t.Move(si.ID)
		if moving {
			v.Move = &MoveView{From: m.From, To: m.To, Step: m.Step.String()}
			if !si.Has(m.To) && m.Step >= placement.MoveLearner {
				nodes = append(nodes, m.To)
				rids[m.To] = m.ToRID
			}
		}
		for _, n := range nodes {
			rv := ReplicaView{Node: n, RID: rids[n], Role: "voter", Removed: moving && m.From == n}
			if !si.Has(n) {
				rv.Role = "learner"
			}
			if ss, ok := seen[key{si.ID, n}]; ok {
				rv.Applied = ss.Applied
				if ss.IsLeader {
					rv.Role, v.Leader = "leader", n
				}
			} else if e, ok := failed[n]; ok {
				rv.Error = e
			} else {
				rv.Error = "replica not running on its node yet"
			}
			v.Replicas = append(v.Replicas, rv)
		}
		out = append(out, v)
	}
	out = append(out, retiredViews(t)...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// nodeStatus is a node's own Status: locally for this node, else by
// OpStatus over the forwarding connection.
func (s *Server) nodeStatus(ctx context.Context, h Host, n placement.Node) (Status, error) {
	if n.ID == h.NodeID() {
		return s.Status(), nil
	}
	p, err := s.peers.get(n.ClientAddr)
	if err != nil {
		return Status{}, err
	}
	ch := make(chan *wire.Response, 1)
	p.send(&wire.Request{Op: wire.OpStatus}, func(r *wire.Response) { ch <- r })
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	select {
	case r := <-ch:
		if err := r.AsError(); err != nil {
			return Status{}, err
		}
		var st Status
		err := json.Unmarshal(r.Value, &st)
		return st, err
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}

// AskJoin sends OpNodeJoin for n to the first of addrs that admits it and
// returns n's meta replica id (a joining node's JoinCluster uses it).
func (s *Server) AskJoin(ctx context.Context, addrs []string, n placement.Node) (uint64, error) {
	body, _ := json.Marshal(n)
	var lastErr error = errors.New("router: no join address")
	for _, addr := range addrs {
		p, err := s.peers.get(addr)
		if err != nil {
			lastErr = err
			continue
		}
		ch := make(chan *wire.Response, 1)
		p.send(&wire.Request{Op: wire.OpNodeJoin, Value: body}, func(r *wire.Response) { ch <- r })
		select {
		case r := <-ch:
			if err := r.AsError(); err != nil {
				lastErr = err
				continue
			}
			var a JoinAnswer
			if err := json.Unmarshal(r.Value, &a); err != nil || a.MetaRID == 0 {
				lastErr = errors.New("router: bad join answer")
				continue
			}
			return a.MetaRID, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return 0, lastErr
}

// remoteLeaderLoop keeps, on a node, the leaders of the shards it holds no
// replica of: a node that joined, or whose replica moved away, asks nodes
// holding replicas (OpRanges: each answers for all its local shards, so one
// request per node covers many shards) instead of sending every request
// through a follower. Shards without a known leader are looked up every
// second, all of them every remoteLeaderRefresh; NotLeader hints update
// them in between. What it hears also feeds the host's leader balancer.
func (s *Server) remoteLeaderLoop() {
	h := s.cfg.Host
	var lastFull time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-time.After(time.Second):
		}
		t := h.Table()
		if t == nil {
			continue
		}
		full := time.Since(lastFull) >= remoteLeaderRefresh
		if full {
			lastFull = time.Now()
		}
		ask := map[string][]uint64{} // node address → shards to learn from it
		for _, si := range t.Shards {
			if _, local := h.Replica(si.ID); local {
				continue
			}
			if addr, _ := s.cache.leaderAddr(si.ID); addr != "" && h.Leader(si.ID) != 0 && !full {
				continue
			}
			if addr := s.cache.anyReplicaAddr(si.ID); addr != "" {
				ask[addr] = append(ask[addr], si.ID)
			}
		}
		for addr, shards := range ask {
			s.learnLeadersFrom(t, addr, shards)
		}
	}
}

const remoteLeaderRefresh = 10 * time.Second

func (s *Server) learnLeadersFrom(t *placement.Table, addr string, shards []uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DialTimeout)
	defer cancel()
	info, err := s.cache.fetchFrom(ctx, addr)
	if err != nil {
		return
	}
	for _, id := range shards {
		// The host's leader balancer counts the leaderships of shards
		// this node holds no replica of (shard/transfer.go).
		s.cfg.Host.NoteLeader(id, info.Leaders[id])
		if n, ok := t.Node(info.Leaders[id]); ok && n.ClientAddr != "" {
			s.cache.learn(&wire.Hint{Shard: id, Leader: n.ClientAddr})
		}
	}
}

// forwardPlacement sends a placement request to another registered node.
func (s *Server) forwardPlacement(ctx context.Context, h Host, req *wire.Request) error {
	t := h.Table()
	if t == nil {
		return wire.Errorf(wire.Unavailable, "no range table yet")
	}
	var lastErr error = wire.Errorf(wire.Unavailable, "no other node to ask")
	for _, n := range t.Nodes {
		if n.ID == h.NodeID() || n.ClientAddr == "" {
			continue
		}
		p, err := s.peers.get(n.ClientAddr)
		if err != nil {
			lastErr = err
			continue
		}
		ch := make(chan *wire.Response, 1)
		fwd := *req
		p.send(&fwd, func(r *wire.Response) { ch <- r })
		select {
		case r := <-ch:
			if err := r.AsError(); err != nil && r.Code.Retryable() {
				lastErr = err
				continue
			}
			return r.AsError()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return lastErr
}
