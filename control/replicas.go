package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lni/dragonboat/v4"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/shard"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// Replica moves (the steps are described in placement/nodes.go). Every
// node runs reconcileReplicas each placement round with the table it just
// read from the meta group, and does its own part:
//
//   - the target of a move starts its replica once it is a non-voting
//     member, and reports "caught up" once a linearizable read on it
//     succeeds (its applied index reached the leader's commit index);
//   - the leader of a moving shard makes the membership changes and records
//     each step (it has a local replica, which dragonboat requires);
//   - the meta group's leader plans the moves that drain nodes;
//   - every node stops and deletes the local replicas the table no longer
//     gives it (the source after a move, a learner after an abort).
//
// Each membership change is checked against the current membership first,
// so a step repeated after a crash is harmless.

// maxMoves bounds the replica moves under way at once (each copies a shard
// to a new machine).
const maxMoves = 2

// stepTimeout bounds one membership change or one step's proposal.
const stepTimeout = 5 * time.Second

func (h *Host) reconcileReplicas(ctx context.Context, t *placement.Table) {
	self := h.cfg.NodeID
	for _, m := range t.Moves {
		if uint32(m.Step) == h.holdMovesAt.Load() {
			continue // test hook: the move waits here
		}
		if m.To == self {
			h.targetDuty(ctx, t, m)
		}
		if s, ok := h.Shard(m.Shard); ok && s.IsLeader() {
			if err := h.driveMove(ctx, t, m); err != nil {
				h.log.Warn("replica move step failed", "shard", m.Shard, "from", m.From, "to", m.To, "step", m.Step, "err", err)
			}
		}
	}
	h.dropUnwanted(ctx, t)
	h.syncRoles(ctx)
	h.leaveDrainingLeaderships(t)
	if h.Leader(placement.MetaShard) == self {
		for _, mv := range t.DrainMoves(maxMoves) {
			if _, err := h.metaProposeResult(ctx, placement.PlanMoveCommand(mv.Shard, mv.From, mv.To)); err != nil {
				h.log.Warn("planning a drain move failed", "shard", mv.Shard, "from", mv.From, "to", mv.To, "err", err)
				break
			}
			h.log.Info("replica move planned (drain)", "shard", mv.Shard, "from", mv.From, "to", mv.To)
		}
	}
}

// targetDuty: start the learner, then report it caught up.
func (h *Host) targetDuty(ctx context.Context, t *placement.Table, m placement.ReplicaMove) {
	if m.Step < placement.MoveLearner || m.Step > placement.MoveVoter {
		return
	}
	s, local := h.Shard(m.Shard)
	if local && s.RID() != m.ToRID {
		return // an older replica of ours is still being cleaned up
	}
	if !local {
		r := localReplica{Shard: m.Shard, RID: m.ToRID, NonVoting: m.Step < placement.MoveVoter}
		if err := h.addLocal(r, true); err != nil {
			h.log.Warn("starting a moved-in replica failed", "shard", m.Shard, "err", err)
		}
		return
	}
	if m.Step != placement.MoveLearner {
		return
	}
	// A read index served on the learner proves it has applied everything
	// the leader had committed when the read started.
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	_, err := h.nh.SyncRead(rctx, m.Shard, statemachine.StatsQuery{})
	cancel()
	if err != nil {
		return // still catching up (or the snapshot is still coming)
	}
	if _, err := h.metaProposeResult(ctx, placement.StepCommand(m.Shard, m.ToRID, placement.MoveLearner, placement.MoveCaughtUp)); err == nil {
		h.log.Info("moved-in replica caught up", "shard", m.Shard, "applied", s.AppliedIndex())
	}
}

// driveMove makes the membership change the move's step calls for and
// records the next step. Runs on the shard's leader.
func (h *Host) driveMove(ctx context.Context, t *placement.Table, m placement.ReplicaMove) error {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	mem, err := h.nh.SyncGetShardMembership(ctx, m.Shard)
	if err != nil {
		return err
	}
	to, _ := t.Node(m.To)
	si, _ := t.Shard(m.Shard)
	isMember := func(rid uint64) bool {
		_, v := mem.Nodes[rid]
		_, nv := mem.NonVotings[rid]
		return v || nv
	}
	step := func(from, next placement.MoveStep) error {
		_, err := h.metaProposeResult(ctx, placement.StepCommand(m.Shard, m.ToRID, from, next))
		if err == nil {
			h.log.Info("replica move", "shard", m.Shard, "from", m.From, "to", m.To, "step", next)
		}
		return err
	}
	switch m.Step {
	case placement.MovePlanned:
		if _, gone := mem.Removed[m.ToRID]; gone {
			return step(placement.MovePlanned, placement.MoveAborting)
		}
		if !isMember(m.ToRID) {
			if err := h.nh.SyncRequestAddNonVoting(ctx, m.Shard, m.ToRID, to.RaftAddr, mem.ConfigChangeID); err != nil {
				return fmt.Errorf("add non-voting: %w", err)
			}
		}
		return step(placement.MovePlanned, placement.MoveLearner)
	case placement.MoveCaughtUp:
		if _, voter := mem.Nodes[m.ToRID]; !voter {
			if err := h.nh.SyncRequestAddReplica(ctx, m.Shard, m.ToRID, to.RaftAddr, mem.ConfigChangeID); err != nil {
				return fmt.Errorf("promote: %w", err)
			}
		}
		return step(placement.MoveCaughtUp, placement.MoveVoter)
	case placement.MoveVoter:
		fromRID := si.RID(m.From)
		if m.From == h.cfg.NodeID {
			// The leader is the replica leaving: hand leadership to the
			// new voter; it finishes the move.
			return h.nh.RequestLeaderTransfer(m.Shard, m.ToRID)
		}
		if fromRID != 0 && isMember(fromRID) {
			if err := h.nh.SyncRequestDeleteReplica(ctx, m.Shard, fromRID, mem.ConfigChangeID); err != nil {
				return fmt.Errorf("remove the source: %w", err)
			}
		}
		return step(placement.MoveVoter, placement.MoveDone)
	case placement.MoveAborting:
		if isMember(m.ToRID) {
			if err := h.nh.SyncRequestDeleteReplica(ctx, m.Shard, m.ToRID, mem.ConfigChangeID); err != nil {
				return fmt.Errorf("remove the learner: %w", err)
			}
		}
		return step(placement.MoveAborting, placement.MoveDone)
	}
	return nil
}

// wanted reports whether the table still gives this node the local replica.
func wanted(t *placement.Table, s *shard.Shard, self uint64) bool {
	if si, ok := t.Shard(s.ID()); ok && si.RID(self) == s.RID() {
		return true
	}
	m, ok := t.Move(s.ID())
	return ok && m.To == self && m.ToRID == s.RID() && m.Step >= placement.MoveLearner && m.Step <= placement.MoveVoter
}

// dropUnwanted stops and deletes local replicas the table no longer lists.
// The table is a linearizable read of the meta group, and a replica leaves
// the table only after it left the Raft membership.
func (h *Host) dropUnwanted(ctx context.Context, t *placement.Table) {
	for _, s := range *h.shards.Load() {
		if wanted(t, s, h.cfg.NodeID) {
			continue
		}
		if _, exists := t.Shard(s.ID()); !exists {
			continue // a shard this table does not know: not ours to judge
		}
		if err := h.removeLocal(ctx, s); err != nil {
			h.log.Warn("removing a moved-out replica failed", "shard", s.ID(), "err", err)
		} else {
			h.log.Info("moved-out replica removed", "shard", s.ID(), "rid", s.RID())
		}
	}
}

// leaveDrainingLeaderships hands the leadership of every shard this node
// leads to a voter on an active node, when this node is draining.
func (h *Host) leaveDrainingLeaderships(t *placement.Table) {
	me, ok := t.Node(h.cfg.NodeID)
	if !ok || me.State != placement.NodeDraining {
		return
	}
	active := map[uint64]bool{}
	for _, n := range t.ActiveNodes() {
		active[n] = true
	}
	for _, s := range *h.shards.Load() {
		if !s.IsLeader() {
			continue
		}
		si, _ := t.Shard(s.ID())
		for _, n := range si.Replicas {
			if active[n] {
				if h.nh.RequestLeaderTransfer(s.ID(), si.RID(n)) == nil {
					h.log.Info("draining: moving shard leadership", "shard", s.ID(), "to", n)
				}
				break
			}
		}
	}
}

// addLocal records the replica in the manifest, then starts it (join: it
// was just added to the shard's membership). Recording first means a crash
// in between restarts it; restart drops a record whose replica never got
// created.
func (h *Host) addLocal(r localReplica, join bool) error {
	h.placeMu.Lock()
	defer h.placeMu.Unlock()
	if _, ok := h.Shard(r.Shard); ok {
		return nil
	}
	h.man.set(r)
	if err := h.man.save(h.cfg.DataDir); err != nil {
		return err
	}
	return h.startData(r, nil, join)
}

// syncRoles records in the manifest the learners (data or meta) that were
// promoted to voters, so a restart starts them as voters. A replica that
// joined as non-voting has its own AddNonVoting in its log: restarted as a
// voter it would replay that entry and dragonboat panics ("is not a
// nonVoting"); restarted as non-voting, replaying the log promotes it again.
// So the manifest flips only after a local snapshot taken past the
// promotion, from which a restart begins with the replica already a voter.
func (h *Host) syncRoles(ctx context.Context) {
	h.placeMu.Lock()
	learners := map[uint64]uint64{} // shard → rid recorded as non-voting
	if m := h.man.Meta; m != nil && m.NonVoting {
		learners[placement.MetaShard] = m.RID
	}
	for _, r := range h.man.Shards {
		if r.NonVoting {
			learners[r.Shard] = r.RID
		}
	}
	h.placeMu.Unlock()
	if len(learners) == 0 {
		return
	}
	var promoted []uint64
	for _, si := range h.nh.GetNodeHostInfo(dragonboat.NodeHostInfoOption{SkipLogInfo: true}).ShardInfoList {
		rid, ok := learners[si.ShardID]
		if !ok || rid != si.ReplicaID || si.Pending || len(si.Replicas) == 0 || si.IsNonVoting {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, stepTimeout)
		_, err := h.nh.SyncRequestSnapshot(sctx, si.ShardID, dragonboat.SnapshotOption{})
		cancel()
		if err != nil && !errors.Is(err, dragonboat.ErrRejected) {
			h.log.Warn("snapshot after promotion failed", "shard", si.ShardID, "err", err)
			continue
		}
		promoted = append(promoted, si.ShardID)
	}
	if len(promoted) == 0 {
		return
	}
	h.placeMu.Lock()
	defer h.placeMu.Unlock()
	for _, shard := range promoted {
		if m := h.man.Meta; shard == placement.MetaShard && m != nil {
			m.NonVoting = false
		}
		for i, r := range h.man.Shards {
			if r.Shard == shard {
				h.man.Shards[i].NonVoting = false
			}
		}
	}
	if err := h.man.save(h.cfg.DataDir); err != nil {
		h.log.Warn("saving the replica manifest failed", "err", err)
	}
}

// removeLocal stops a local replica, forgets it and deletes its data.
func (h *Host) removeLocal(ctx context.Context, s *shard.Shard) error {
	h.placeMu.Lock()
	defer h.placeMu.Unlock()
	old := *h.shards.Load()
	next := make(map[uint64]*shard.Shard, len(old))
	for id, x := range old {
		if id != s.ID() {
			next[id] = x
		}
	}
	h.shards.Store(&next)
	h.replicasChangedNotify()
	h.mu.Lock()
	delete(h.leaders, s.ID())
	delete(h.leaderSince, s.ID())
	h.mu.Unlock()
	s.EndWatches(wire.Closed, "the shard's replica moved off this node: resume the watch from the last revision")
	s.Stop()
	if err := h.nh.StopReplica(s.ID(), s.RID()); err != nil && !errors.Is(err, dragonboat.ErrShardNotFound) {
		return err
	}
	// Its log is about to go: nothing will record its last entries again.
	if d, ok := h.cfg.Recorder.(shard.Durabler); ok {
		if err := d.Durable(); err != nil {
			h.log.Warn("audit records of a removed replica not made durable", "shard", s.ID(), "err", err)
		}
	}
	h.man.drop(s.ID())
	if err := h.man.save(h.cfg.DataDir); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	return h.nh.SyncRemoveData(ctx, s.ID(), s.RID())
}

// metaProposeResult proposes a meta command and returns its result value;
// a command the meta state machine refused comes back as an error.
func (h *Host) metaProposeResult(ctx context.Context, cmd []byte) (uint64, error) {
	r, err := h.nh.SyncPropose(ctx, h.nh.GetNoOPSession(placement.MetaShard), cmd)
	if err != nil {
		return 0, err
	}
	if r.Value == 0 && len(r.Data) > 0 {
		return 0, &placement.RefusedError{Msg: string(r.Data)}
	}
	return r.Value, nil
}

func (h *Host) self() placement.Node {
	return placement.Node{ID: h.cfg.NodeID, RaftAddr: h.cfg.RaftAddr, ClientAddr: h.cfg.ClientAddr, AdminAddr: h.cfg.AdminAddr}
}

// HoldMovesAt makes this node do nothing for replica moves at the given
// step (0: hold none). Tests use it to stop a move at a chosen step, then
// crash a node there.
func (h *Host) HoldMovesAt(step placement.MoveStep) { h.holdMovesAt.Store(uint32(step)) }
