package control

import (
	"context"
	"fmt"
	"time"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// Leader transfers. dragonboat starts a leader transfer only on a node that
// hosts a replica of the shard (a follower passes the request on to its
// leader), so a node without one (the meta leader balancing leaders, or the
// node an operator's request reached) sends OpLeaderTransfer to a node that
// has one (shard.Shard's transferLocal), over the router's authenticated
// peer forwarding, exactly as the range-move driver sends its steps
// (moves.go submitTo).

// transferTarget checks that node holds a voting replica of shardID and
// returns its replica id.
func (h *Host) transferTarget(shardID, node uint64) (uint64, error) {
	t := h.Table()
	if t == nil {
		return 0, wire.Errorf(wire.Unavailable, "no range table yet")
	}
	si, ok := t.Shard(shardID)
	if !ok {
		return 0, &placement.RefusedError{Msg: fmt.Sprintf("no data shard %d", shardID)}
	}
	rid := si.RID(node)
	if rid == 0 {
		return 0, &placement.RefusedError{Msg: fmt.Sprintf("node %d holds no voting replica of shard %d (replicas on %v)", node, shardID, si.Replicas)}
	}
	return rid, nil
}

// requestTransfer starts a transfer of shardID's leadership to replica rid,
// through the local replica or a node holding one, and calls done once.
func (h *Host) requestTransfer(shardID, rid uint64, done func(*wire.Response)) {
	h.submitTo(shardID, &wire.Request{Op: wire.OpLeaderTransfer, Shard: shardID, ToReplica: rid}, done)
}

// TransferLeadership asks shard shardID's Raft group to hand its leadership
// to the replica on node (an operator's shard.transfer). It returns once the
// transfer has been started on a replica of the shard, which may be on
// another node; the election that follows takes a few heartbeats. The
// leader balancer may move the leadership on again later if the spread
// calls for it (it leaves a leadership alone for minLeadership).
func (h *Host) TransferLeadership(ctx context.Context, shardID, node uint64) error {
	rid, err := h.transferTarget(shardID, node)
	if err != nil {
		return err
	}
	if t := h.Table(); t != nil {
		if n, ok := t.Node(node); ok && n.State == placement.NodeDraining {
			return &placement.RefusedError{Msg: fmt.Sprintf("node %d is draining: it receives no leadership", node)}
		}
	}
	_, err = h.shardOp(ctx, shardID, &wire.Request{Op: wire.OpLeaderTransfer, Shard: shardID, ToReplica: rid})
	if err != nil {
		return err
	}
	if _, local := h.Shard(shardID); !local {
		h.forgetLeader(shardID) // until heard again, after the transfer
	}
	h.log.Info("shard leadership transfer requested", "shard", shardID, "to", node)
	return nil
}

// NoteLeader records the leader node of a shard this node holds no replica
// of, as a node holding one reported it (the router's remote leader loop).
// The leader balancer counts these leaderships too; a change restarts the
// shard's stability clock, from when it was heard (never earlier than it
// happened).
func (h *Host) NoteLeader(shardID, node uint64) {
	if _, local := h.Shard(shardID); local || node == 0 {
		return
	}
	h.mu.Lock()
	if h.remote[shardID] != node {
		h.remote[shardID] = node
		h.remoteSince[shardID] = time.Now()
	}
	h.mu.Unlock()
}

// forgetLeader drops what was heard of a remote shard's leader (a transfer
// was just requested): the balancer waits until the router hears it again.
func (h *Host) forgetLeader(shardID uint64) {
	h.mu.Lock()
	delete(h.remote, shardID)
	h.remoteSince[shardID] = time.Now()
	h.mu.Unlock()
}
