package lease

import (
	"container/heap"
	"time"

	"github.com/wardenlock/warden/internal/leasetrace"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// Lease checkpoints. Deadlines live only in the leader's memory,
// so without help a new leader can only give each lease a full TTL, and a
// lease whose holder has died survives as long as leaderships keep changing
// faster than one TTL. So the leader records, every CheckpointInterval, the
// time left on each lease nobody keeps alive (one batched OpCheckpoint), and
// a new leader starts such a lease at min(TTL, checkpoint + allowance).
//
// Which leases: one that has gone more than half its TTL without a
// keepalive (clients keep alive every TTL/3, so in steady leadership live
// sessions are never checkpointed and their keepalives never write to the
// log); right after a promotion, every loaded lease that has not been kept
// alive through this leader for one interval (so that leaderships much
// shorter than a TTL still make progress: each records what it knows); and,
// once checkpointed, a lease whose record is at least one interval out of
// date. After a leader change, each live session's next keepalive costs one
// (batched) clear.
//
// Safety (the lease promise, docs/guarantees.md): a checkpoint records the lessor's deadline,
// which is never earlier than TTL after the last acknowledged keepalive, and
// a new leader counts it from its own promotion, later still. A keepalive
// for a lease whose state machine holds a checkpoint is acknowledged only
// after the checkpoint has been cleared through the log (the rare write a
// keepalive can cost: a client that was silent for more than TTL/2).
// Checkpoints from an older term are refused by the state machine, and cpMu
// keeps this leader's checkpoints and clears in order.

// maxCheckpointBatch bounds the leases in one OpCheckpoint entry.
const maxCheckpointBatch = 4096

// startFromCheckpoint gives a loaded lease the checkpointed remaining time
// plus the allowance, never more than its TTL. Called with l.mu held.
func (l *Lessor) startFromCheckpoint(le *lease, cp time.Duration, now time.Time) {
	if le == nil {
		return
	}
	le.hasCP, le.cp = true, cp
	if leasetrace.On {
		l.trace("start from checkpoint", "lease", le.id, "checkpoint", cp, "now", tt(now), "old", tt(le.deadline),
			"cap", tt(now.Add(min(le.ttl, cp+l.cfg.LeaseAllowance))))
	}
	if d := now.Add(min(le.ttl, cp+l.cfg.LeaseAllowance)); d.Before(le.deadline) {
		le.deadline = d
		heap.Fix(&l.heap, le.idx)
	}
}

// checkpointDue reports whether tick should start a checkpoint round, and
// marks it started. Called with l.mu held.
func (l *Lessor) checkpointDue(now time.Time) bool {
	if l.cpRunning || now.Sub(l.cpLast) < l.cfg.CheckpointInterval || len(l.heap) == 0 {
		return false
	}
	l.cpRunning, l.cpLast = true, now
	return true
}

// checkpointRound proposes the due checkpoints and waits until they apply.
func (l *Lessor) checkpointRound(epoch uint64) {
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	defer func() { l.mu.Lock(); l.cpRunning = false; l.mu.Unlock() }()
	l.mu.Lock()
	if l.epoch != epoch || !l.leader || l.loading != nil {
		l.mu.Unlock()
		return
	}
	req := l.dueCheckpoints(l.cfg.Clock.Now())
	l.mu.Unlock()
	if req == nil {
		return
	}
	resp := l.proposeWait(req)
	if leasetrace.On {
		l.trace("checkpoint round", "leases", req.Leases, "remaining_ms", req.Remaining, "ok", resp != nil && resp.Code == wire.OK)
	}
	if resp == nil || resp.Code != wire.OK {
		return // not applied, or not known to be: the next round tries again
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epoch != epoch {
		return
	}
	for i, id := range req.Leases {
		if le := l.leases[id]; le != nil {
			le.hasCP, le.cp = true, time.Duration(req.Remaining[i])*time.Millisecond
		}
	}
}

// dueCheckpoints builds the checkpoint request, or nil. Called with l.mu held.
func (l *Lessor) dueCheckpoints(now time.Time) *wire.Request {
	var req *wire.Request
	for _, le := range l.heap { // the heap holds exactly the leases not being expired
		if req != nil && len(req.Leases) >= maxCheckpointBatch {
			break
		}
		left := le.deadline.Sub(now)
		if left <= 0 {
			continue // Expire's business
		}
		var due bool
		switch {
		case le.hasCP:
			due = le.cp-left >= l.cfg.CheckpointInterval
		case le.fresh:
			due = le.ttl-left >= l.cfg.CheckpointInterval
		default:
			due = left < le.ttl/2
		}
		if !due {
			continue
		}
		if req == nil {
			req = &wire.Request{Op: wire.OpCheckpoint, Term: l.term}
		}
		// Rounded up: a checkpoint may only overstate the time left.
		ms := (left + time.Millisecond - 1) / time.Millisecond
		req.Leases = append(req.Leases, le.id)
		req.Remaining = append(req.Remaining, int64(ms))
	}
	return req
}

// clearCheckpoints removes the checkpoints of ids through the log before
// keepalives for them are acknowledged. Called with cpMu held.
func (l *Lessor) clearCheckpoints(ids []uint64) bool {
	l.mu.Lock()
	term := l.term
	l.mu.Unlock()
	rem := make([]int64, len(ids))
	for i := range rem {
		rem[i] = -1
	}
	resp := l.proposeWait(&wire.Request{Op: wire.OpCheckpoint, Term: term, Leases: ids, Remaining: rem})
	if leasetrace.On {
		l.trace("checkpoint clear", "leases", ids, "ok", resp != nil && resp.Code == wire.OK)
	}
	if resp == nil || resp.Code != wire.OK {
		return false
	}
	l.mu.Lock()
	for _, id := range ids {
		if le := l.leases[id]; le != nil {
			le.hasCP = false
		}
	}
	l.mu.Unlock()
	return true
}

// proposeWait proposes req and waits for its answer; nil if the shard stops.
func (l *Lessor) proposeWait(req *wire.Request) *wire.Response {
	done := make(chan *wire.Response, 1)
	l.propose(req, func(r *wire.Response) { done <- r })
	select {
	case r := <-done:
		return r
	case <-l.cfg.Stop:
		return nil
	}
}

// needsClear lists the leases of a keepalive batch whose checkpoints must be
// cleared before the batch is answered.
func needsClear(states []statemachine.LeaseState, ids []uint64) []uint64 {
	var out []uint64
	seen := map[uint64]bool{}
	for i, st := range states {
		if st == statemachine.LeaseCheckpointed && i < len(ids) && !seen[ids[i]] {
			seen[ids[i]] = true
			out = append(out, ids[i])
		}
	}
	return out
}
