package lease

import (
	"time"

	"github.com/wardenlock/warden/internal/leasetrace"
	"github.com/wardenlock/warden/statemachine"
)

// The lessor's decision trace (internal/leasetrace): call sites check
// leasetrace.On first, so the arguments cost nothing when it is off.

func (l *Lessor) trace(msg string, args ...any) {
	l.log.Info("lease trace: "+msg, append([]any{"shard", l.cfg.Shard}, args...)...)
}

// traceRefresh logs a keepalive's effect on one lease, unless neither the
// state machine nor the lessor knows it (every shard sees every keepalive).
// Called with l.mu held, before refresh changes anything.
func (l *Lessor) traceRefresh(id uint64, state statemachine.LeaseState, received time.Time) {
	le := l.leases[id]
	if le == nil && state == statemachine.LeaseUnknown {
		return
	}
	if le == nil {
		l.trace("refresh of an untracked lease", "lease", id, "state", state, "received", tt(received))
		return
	}
	l.trace("refresh", "lease", id, "state", state, "received", tt(received), "old", tt(le.deadline),
		"new", tt(received.Add(le.ttl)), "expiring", le.expiring, "in_heap", le.idx >= 0)
}

// tt formats a trace time (leasetrace.Time).
func tt(t time.Time) string { return leasetrace.Time(t) }
