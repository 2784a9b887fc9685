package shard

import (
	"sync/atomic"
	"time"

	"github.com/wardenlock/warden/wire"
)

// deadlineTimer is the leader's timer for replicated deadlines: revocation
// deadlines and lock-delay ends. The state machine publishes the earliest
// one (NextDeadline, in replicated time); once replicated time has reached
// it, the leader proposes OpDeadlines, and the state machine applies what is
// due at that entry's stamp. Nothing about the deadline lives only here: a
// new leader's timer reads the same NextDeadline and carries on.
type deadlineTimer struct {
	s        *Shard
	inflight atomic.Bool
	seen     int64 // anchor of the replicated-time estimate, and when (monotonic)
	seenAt   time.Time
}

// tick runs on the lessor loop's goroutine.
func (d *deadlineTimer) tick() {
	if !d.s.isLeader.Load() {
		return
	}
	m := d.s.sm.Load()
	if m == nil {
		return
	}
	next := m.NextDeadline()
	if next == 0 {
		return
	}
	// Estimate replicated time the way the proposer stamps it: an anchor
	// advanced at real-time speed, re-anchored when applied time passes it.
	last, now := m.LastTime(), time.Now()
	if d.seenAt.IsZero() || last > d.seen+now.Sub(d.seenAt).Milliseconds() {
		d.seen, d.seenAt = last, now
	}
	if d.seen+now.Sub(d.seenAt).Milliseconds() < next || !d.inflight.CompareAndSwap(false, true) {
		return
	}
	d.s.proposer.submit(&wire.Request{Op: wire.OpDeadlines}, wire.AnswerFunc(func(r *wire.Response) {
		d.inflight.Store(false)
		if r.Code != wire.OK {
			d.s.log.Debug("deadlines proposal failed", "shard", d.s.id, "code", r.Code, "msg", r.Msg)
		}
	}))
}
