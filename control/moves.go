package control

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/wardenlock/warden/internal/backoff"
	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// The move driver runs on the meta group's leader, inside the placement
// loop. It takes the first move recorded in the table and performs its next
// step, records the step in the meta group, and goes on until the move is
// done. Every step is idempotent, so a driver that dies anywhere (before or
// after the shard applied the step, before or after the record) is replaced
// by the next meta leader, which repeats the last unrecorded step.

// MoveStepDropped is reported to MoveHook after the source dropped the range
// (the last step before the record is removed).
const MoveStepDropped placement.RangeStep = 4

var errStopped = errors.New("shard: host is stopping")

// RangeCommand proposes a range change to the meta group (from any node)
// and returns the new move's id for a move.
func (h *Host) RangeCommand(ctx context.Context, c placement.RangeCommand) (uint64, error) {
	cmd, err := placement.EncodeRange(c)
	if err != nil {
		return 0, err
	}
	res, err := h.nh.SyncPropose(ctx, h.nh.GetNoOPSession(placement.MetaShard), cmd)
	if err != nil {
		return 0, err
	}
	if err := placement.RangeResult(placement.Result{Value: res.Value, Data: res.Data}); err != nil {
		return 0, wire.Errorf(wire.InvalidArgument, "%v", err)
	}
	h.RefreshTable(ctx)
	if c.Op == "move" {
		id, _ := strconv.ParseUint(string(res.Data), 10, 64)
		return id, nil
	}
	return 0, nil
}

// driveMoves advances the first move in flight, on the meta leader only.
func (h *Host) driveMoves(t *placement.Table) {
	if len(t.RangeMoves) == 0 || h.Leader(placement.MetaShard) != h.cfg.NodeID {
		return
	}
	mv := t.RangeMoves[0]
	if err := h.driveRangeMove(mv); err != nil && !errors.Is(err, errStopped) {
		h.log.Warn("range move stalled; will retry", "move", mv.ID, "step", mv.Step, "err", err)
	}
}

func (h *Host) driveRangeMove(mv placement.Move) error {
	for {
		if h.stopping() {
			return errStopped
		}
		if h.Leader(placement.MetaShard) != h.cfg.NodeID {
			return nil // the new meta leader takes over
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		done, err := h.moveStep(ctx, mv)
		cancel()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		t, err := h.refreshMeta()
		if err != nil {
			return err
		}
		next, ok := t.MoveOf(mv.ID)
		if !ok {
			return nil
		}
		mv = next
	}
}

func (h *Host) refreshMeta() (*placement.Table, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t, err := h.RefreshTable(ctx)
	if err == nil && t == nil {
		err = errors.New("no table")
	}
	return t, err
}

// moveStep performs the move's next step and records it. done: the move
// record is gone (finished or rolled back).
func (h *Host) moveStep(ctx context.Context, mv placement.Move) (bool, error) {
	rg := wire.Range{Start: mv.Start, End: mv.End, Shard: mv.From}
	switch {
	case mv.Abort:
		return true, h.rollbackMove(ctx, mv, rg)
	case mv.Step == placement.RangePlanned:
		if err := h.syncRanges(ctx, mv.From, mv.To); err != nil {
			return false, err
		}
		r, err := h.shardOp(ctx, mv.From, &wire.Request{Op: wire.OpFreezeRange, Gen: mv.ID, Ranges: []wire.Range{rg}})
		if err != nil {
			if r != nil && !r.Code.Retryable() {
				return false, h.metaRange(ctx, placement.RangeCommand{Op: "abort", Move: mv.ID, Why: err.Error()})
			}
			return false, err
		}
		return false, h.recordStep(ctx, mv, placement.RangeFrozen)
	case mv.Step == placement.RangeFrozen:
		if err := h.installMove(ctx, mv); err != nil {
			var we *wire.Error
			if errors.As(err, &we) && !we.Code.Retryable() && we.Code != wire.Ambiguous {
				h.log.Warn("range move cannot install; rolling back", "move", mv.ID, "err", err)
				return false, h.metaRange(ctx, placement.RangeCommand{Op: "abort", Move: mv.ID, Why: err.Error()})
			}
			return false, err
		}
		return false, h.recordStep(ctx, mv, placement.RangeInstalled)
	case mv.Step == placement.RangeInstalled:
		if err := h.metaRange(ctx, placement.RangeCommand{Op: "switch", Move: mv.ID}); err != nil {
			return false, err
		}
		return false, h.hook(mv.ID, placement.RangeSwitched)
	case mv.Step == placement.RangeSwitched:
		if _, err := h.shardOp(ctx, mv.From, &wire.Request{Op: wire.OpDropRange, Gen: mv.ID, Ranges: []wire.Range{rg}}); err != nil {
			return false, err
		}
		if err := h.hook(mv.ID, MoveStepDropped); err != nil {
			return false, err
		}
		if err := h.metaRange(ctx, placement.RangeCommand{Op: "end", Move: mv.ID}); err != nil {
			return false, err
		}
		h.RangeMoved(mv.Start, mv.End, mv.From, mv.To, mv.ID) // counted for metrics, logged at info
		return true, nil
	}
	return false, fmt.Errorf("move %d: unknown step %v", mv.ID, mv.Step)
}

// syncRanges makes the shards of a move own exactly what the table gives
// them (a split just before the move may not have reached them yet; the
// reconciler leaves shards in a move alone).
func (h *Host) syncRanges(ctx context.Context, shards ...uint64) error {
	t := h.Table()
	if t == nil {
		return errors.New("no table")
	}
	for _, id := range shards {
		r, err := h.shardOp(ctx, id, &wire.Request{Op: wire.OpSetRanges, Gen: t.Gen, Ranges: t.RangesOf(id)})
		if err != nil && (r == nil || r.Code != wire.InvalidArgument) {
			return err
		}
	}
	return nil
}

func (h *Host) recordStep(ctx context.Context, mv placement.Move, step placement.RangeStep) error {
	if err := h.metaRange(ctx, placement.RangeCommand{Op: "step", Move: mv.ID, Step: step}); err != nil {
		return err
	}
	return h.hook(mv.ID, step)
}

// installMove copies the frozen range's state to the destination in
// chunks; the last one makes the destination the range's owner.
// Each chunk is read from the source (OpExportRange) and proposed to the
// destination, locally or through a node with a replica of each.
func (h *Host) installMove(ctx context.Context, mv placement.Move) error {
	gen := uint64(0)
	if t := h.Table(); t != nil {
		gen = t.Gen + 1
	}
	from := wire.Range{Start: mv.Start, End: mv.End, Shard: mv.From}
	to := wire.Range{Start: mv.Start, End: mv.End, Shard: mv.To, Gen: gen}
	n := uint32(1)
	for i := uint32(0); i < n; i++ {
		x, err := h.shardOp(ctx, mv.From, &wire.Request{Op: wire.OpExportRange, Gen: mv.ID, Ranges: []wire.Range{from}, Chunk: i})
		if err != nil {
			return err
		}
		if i == 0 {
			n = max(1, x.Count)
		} else if x.Count != n {
			return fmt.Errorf("export of move %d changed from %d to %d chunks", mv.ID, n, x.Count)
		}
		req := &wire.Request{Op: wire.OpInstallRange, Gen: mv.ID, Ranges: []wire.Range{to}, Value: x.Value}
		if i == n-1 {
			req.Flags |= wire.FlagMoveFinal
		}
		if _, err := h.shardOp(ctx, mv.To, req); err != nil {
			return err
		}
	}
	h.log.Info("range installed", "move", mv.ID, "to", mv.To, "chunks", n)
	return nil
}

// rollbackMove undoes a move that never finished installing: the
// destination forgets what chunks put there, the source unfreezes.
func (h *Host) rollbackMove(ctx context.Context, mv placement.Move, rg wire.Range) error {
	to := rg
	to.Shard = mv.To
	if _, err := h.shardOp(ctx, mv.To, &wire.Request{Op: wire.OpDropRange, Gen: mv.ID, Ranges: []wire.Range{to}}); err != nil {
		return err
	}
	if _, err := h.shardOp(ctx, mv.From, &wire.Request{Op: wire.OpUnfreezeRange, Gen: mv.ID, Ranges: []wire.Range{rg}}); err != nil {
		return err
	}
	if err := h.metaRange(ctx, placement.RangeCommand{Op: "end", Move: mv.ID}); err != nil {
		return err
	}
	h.log.Warn("range move rolled back", "move", mv.ID, "reason", mv.Reason)
	return nil
}

func (h *Host) metaRange(ctx context.Context, c placement.RangeCommand) error {
	_, err := h.RangeCommand(ctx, c)
	return err
}

// Forwarder runs req on a shard this node holds no replica of, on a node
// that holds one (the router's forwarding over peer connections), and calls
// done once with the answer.
type Forwarder func(shardID uint64, req *wire.Request, done func(*wire.Response))

// SetForwarder lets the move driver reach shards with no local replica; the
// node's router sets it.
func (h *Host) SetForwarder(f Forwarder) { h.forward.Store(&f) }

// SetNodeCPU gives the shard policy each node's CPU use as the node's
// router last heard it (policy.go); unset, the policy reads ops/s alone.
func (h *Host) SetNodeCPU(f func() map[uint64]cpuload.Reading) { h.nodeCPU.Store(&f) }

// submitTo runs req on the local replica of shardID, or through the
// forwarder when there is none.
func (h *Host) submitTo(shardID uint64, req *wire.Request, done func(*wire.Response)) {
	if s, ok := h.Shard(shardID); ok {
		s.Submit(req, done)
		return
	}
	if f := h.forward.Load(); f != nil {
		(*f)(shardID, req, done)
		return
	}
	done(&wire.Response{ID: req.ID, Code: wire.Unavailable,
		Msg: fmt.Sprintf("shard %d has no replica on node %d and no router forwards for it", shardID, h.cfg.NodeID)})
}

// shardOpRetry spaces shardOp's retries.
var shardOpRetry = backoff.Policy{Base: 20 * time.Millisecond, Max: 640 * time.Millisecond}

// shardOp runs an internal op on a shard, through its local replica or a
// node that has one, and retries routing and availability errors until ctx
// ends.
func (h *Host) shardOp(ctx context.Context, shardID uint64, req *wire.Request) (*wire.Response, error) {
	for attempt := 0; ; attempt++ {
		done := make(chan *wire.Response, 1)
		op := *req
		h.submitTo(shardID, &op, func(r *wire.Response) { done <- r })
		var r *wire.Response
		select {
		case r = <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r.Code == wire.OK {
			return r, nil
		}
		if !r.Code.Retryable() && r.Code != wire.Ambiguous {
			return r, r.AsError()
		}
		select {
		case <-ctx.Done():
			return r, r.AsError()
		case <-h.stopc:
			return r, errStopped
		case <-time.After(shardOpRetry.Delay(attempt)):
		}
	}
}

func (h *Host) stopping() bool {
	select {
	case <-h.stopc:
		return true
	default:
		return false
	}
}

// hook reports a finished step to the test hook, if any, and stops the
// driver when the host is closing meanwhile.
func (h *Host) hook(id uint64, step placement.RangeStep) error {
	if h.cfg.MoveHook != nil {
		h.cfg.MoveHook(id, step, h.stopc)
	}
	if h.stopping() {
		return errStopped
	}
	return nil
}
