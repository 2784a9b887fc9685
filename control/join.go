package control

import (
	"context"
	"fmt"
	"time"

	"github.com/wardenlock/warden/placement"
)

// Joining: a new node (HostConfig.Join) asks a running node to admit it.
// The running node registers it in the meta group and adds it to the meta
// group as a non-voting member; the new node then starts its meta replica,
// which catches up and gives it the table locally (linearizable reads,
// proposals forwarded to the meta leader). The meta group's voters stay the
// initial members: a meta voter is only replaced when its node is removed
// (RemoveNode promotes a non-voting meta replica first). Data replicas come
// to the new node by replica moves.

// AdmitNode registers a joining node and makes it a non-voting member of
// the meta group. It returns the node's meta replica id. Repeating it is
// harmless.
func (h *Host) AdmitNode(ctx context.Context, n placement.Node) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	rid, err := h.metaProposeResult(ctx, placement.JoinCommand(n))
	if err != nil {
		return 0, err
	}
	mem, err := h.nh.SyncGetShardMembership(ctx, placement.MetaShard)
	if err != nil {
		return 0, err
	}
	_, voter := mem.Nodes[rid]
	_, learner := mem.NonVotings[rid]
	if _, gone := mem.Removed[rid]; gone {
		return 0, &placement.RefusedError{Msg: fmt.Sprintf("meta replica %d of node %d was removed", rid, n.ID)}
	}
	if !voter && !learner {
		if err := h.nh.SyncRequestAddNonVoting(ctx, placement.MetaShard, rid, n.RaftAddr, mem.ConfigChangeID); err != nil {
			return 0, fmt.Errorf("shard: add node %d to the meta group: %w", n.ID, err)
		}
	}
	h.log.Info("node admitted", "node", n.ID, "raft", n.RaftAddr, "meta_rid", rid)
	return rid, nil
}

// JoinCluster admits this node through ask (which reaches a running node's
// AdmitNode) and starts the meta replica. It retries until it succeeds or
// ctx ends; a node that has joined before returns at once.
func (h *Host) JoinCluster(ctx context.Context, ask func(context.Context, placement.Node) (uint64, error)) error {
	for attempt := 0; !h.metaStarted.Load(); attempt++ {
		actx, cancel := context.WithTimeout(ctx, stepTimeout)
		rid, err := ask(actx, h.self())
		cancel()
		if err == nil {
			return h.startJoinedMeta(rid)
		}
		h.log.Warn("join: not admitted yet", "err", err, "attempt", attempt)
		select {
		case <-ctx.Done():
			return fmt.Errorf("shard: join: %w (last error: %v)", ctx.Err(), err)
		case <-h.stopc:
			return fmt.Errorf("shard: join: host closed")
		case <-time.After(time.Duration(min(attempt+1, 10)) * 200 * time.Millisecond):
		}
	}
	return nil
}

func (h *Host) startJoinedMeta(rid uint64) error {
	h.placeMu.Lock()
	defer h.placeMu.Unlock()
	if h.metaStarted.Load() {
		return nil
	}
	r := localReplica{Shard: placement.MetaShard, RID: rid, NonVoting: rid != h.cfg.NodeID}
	h.man.Meta = &r
	if err := h.man.save(h.cfg.DataDir); err != nil {
		return err
	}
	return h.startMeta(r, nil, true)
}

// Joined reports whether this node runs a meta replica (always, except
// while a joining node waits to be admitted).
func (h *Host) Joined() bool { return h.metaStarted.Load() }

// SetNodeState sets a node active ("") or draining.
func (h *Host) SetNodeState(ctx context.Context, id uint64, state string) error {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	_, err := h.metaProposeResult(ctx, placement.NodeStateCommand(id, state))
	return err
}

// MoveReplica records a move of shard's replica from → to; the placement
// rounds carry it out. It returns the new replica's id.
func (h *Host) MoveReplica(ctx context.Context, shard, from, to uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	return h.metaProposeResult(ctx, placement.PlanMoveCommand(shard, from, to))
}

// AbortMove rolls back shard's replica move, if the target is not a voter
// yet.
func (h *Host) AbortMove(ctx context.Context, shard uint64) error {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	t, err := h.RefreshTable(ctx)
	if err != nil {
		return err
	}
	m, ok := t.Move(shard)
	if !ok {
		return &placement.RefusedError{Msg: fmt.Sprintf("shard %d has no move under way", shard)}
	}
	_, err = h.metaProposeResult(ctx, placement.StepCommand(shard, m.ToRID, m.Step, placement.MoveAborting))
	return err
}

// RemoveNode takes a node that holds no data replica out of the cluster:
// out of the meta group (promoting a non-voting meta replica first when the
// node was a meta voter, so the meta group keeps its size) and out of the
// table. The removed node's process should then be stopped.
func (h *Host) RemoveNode(ctx context.Context, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 3*stepTimeout)
	defer cancel()
	t, err := h.RefreshTable(ctx)
	if err != nil {
		return err
	}
	n, ok := t.Node(id)
	if !ok {
		return &placement.RefusedError{Msg: fmt.Sprintf("node %d is not registered", id)}
	}
	if c := t.ReplicaCount(id); c > 0 {
		return &placement.RefusedError{Msg: fmt.Sprintf("node %d still holds %d replicas: drain it first", id, c)}
	}
	mem, err := h.nh.SyncGetShardMembership(ctx, placement.MetaShard)
	if err != nil {
		return err
	}
	rid := n.MetaRID()
	if _, voter := mem.Nodes[rid]; voter {
		if err := h.promoteMetaReplacement(ctx, t, mem.NonVotings, mem.ConfigChangeID, len(mem.Nodes), id); err != nil {
			return err
		}
		if mem, err = h.nh.SyncGetShardMembership(ctx, placement.MetaShard); err != nil {
			return err
		}
	}
	_, voter := mem.Nodes[rid]
	_, learner := mem.NonVotings[rid]
	h.log.Info("removing node from the meta group", "node", id, "rid", rid, "voter", voter, "learner", learner, "voters", len(mem.Nodes))
	if voter {
		if err := h.moveMetaLeadership(ctx, id, mem.Nodes); err != nil {
			return err
		}
	}
	if voter || learner {
		if err := h.nh.SyncRequestDeleteReplica(ctx, placement.MetaShard, rid, mem.ConfigChangeID); err != nil {
			return fmt.Errorf("shard: remove node %d from the meta group: %w", id, err)
		}
	}
	h.log.Info("node left the meta group", "node", id)
	_, err = h.metaProposeResult(ctx, placement.RemoveNodeCommand(id))
	if err == nil {
		h.log.Info("node removed", "node", id)
	}
	return err
}

// promoteMetaReplacement turns a non-voting meta replica of an active node
// into a voter before voter `leaving` goes. With none available it refuses,
// unless at least three voters remain.
func (h *Host) promoteMetaReplacement(ctx context.Context, t *placement.Table, learners map[uint64]string, ccid uint64, voters int, leaving uint64) error {
	for _, a := range t.ActiveNodes() {
		n, _ := t.Node(a)
		if _, ok := learners[n.MetaRID()]; ok && a != leaving {
			if err := h.nh.SyncRequestAddReplica(ctx, placement.MetaShard, n.MetaRID(), n.RaftAddr, ccid); err != nil {
				return fmt.Errorf("shard: promote node %d in the meta group: %w", a, err)
			}
			h.log.Info("meta group: voter replaced", "leaving", leaving, "promoted", a)
			return nil
		}
	}
	if voters-1 >= 3 {
		return nil
	}
	return &placement.RefusedError{Msg: fmt.Sprintf("node %d is one of %d meta group voters and no other node can replace it: add a node first", leaving, voters)}
}

// moveMetaLeadership hands the meta group's leadership away from node
// `leaving` before its replica is deleted: a leader that applies its own
// removal steps down at once, and the others must elect a new one before
// the change (and the caller's wait for it) completes.
func (h *Host) moveMetaLeadership(ctx context.Context, leaving uint64, voters map[uint64]string) error {
	for h.Leader(placement.MetaShard) == leaving {
		for rid := range voters {
			if placement.NodeOf(rid) != leaving {
				h.nh.RequestLeaderTransfer(placement.MetaShard, rid)
				break
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("shard: move the meta leadership off node %d: %w", leaving, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
