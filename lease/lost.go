package lease

import (
	"strings"
	"sync"
	"time"

	"github.com/wardenlock/warden/wire"
)

// LostHolds keeps, per session lease, the recent events that end one of
// its holds without the holder's doing (wire.Event.TellsHolder: a
// revocation at its deadline, an admin's resign or hand-over, a release by
// token from another lease). The keepalive answers of the lease carry them:
// the pushed notice (router/holds.go) is the fast path, this is the
// fallback for a holder whose push was lost (with its connection, or while
// its router renewed the subscription that feeds it). Every replica keeps
// them from its own applies, so a new leader answers with them too.
//
// A notice stays until its lease ends, or until the leader finds it older
// than twice the lease's TTL (plus a margin) when answering a keepalive: a
// client that has not had a keepalive acknowledged for a whole TTL has
// lost its session, and with it every hold, anyway. Ages are measured on
// each replica's own clock from when it applied the event, so a leader
// with a skewed clock prunes nothing early. The counts are bounded per
// lease and per shard; the oldest notices go first.
type LostHolds struct {
	mu      sync.Mutex
	byLease map[uint64][]lostHold
	order   []uint64 // lease of each notice, in arrival order (may name dropped ones)
	n       int
}

type lostHold struct {
	ev wire.Event
	at time.Time // when this replica applied it
}

const (
	maxLostPerLease = 16
	maxLostPerShard = 1 << 16
	// lostMargin is added to twice a lease's TTL before a notice is pruned.
	lostMargin = 10 * time.Second
)

// observe records the notices among events and forgets those of ended
// leases. It runs inside Update: cheap when nothing concerns it.
func (lh *LostHolds) Observe(events []wire.Event, clock Clock) {
	for i := range events {
		ev := &events[i]
		if !ev.TellsHolder() || wire.SingleLease(ev.Lease) {
			continue // a single-lock lease has no keepalive answers: its renew says it ended
		}
		lh.mu.Lock()
		if ev.Kind == wire.EvLeaseEnd {
			lh.forgetLocked(ev.Lease)
		} else {
			lh.addLocked(ev, clock.Now())
		}
		lh.mu.Unlock()
	}
}

func (lh *LostHolds) addLocked(ev *wire.Event, now time.Time) {
	if lh.byLease == nil {
		lh.byLease = map[uint64][]lostHold{}
	}
	kept := lh.byLease[ev.Lease]
	if len(kept) == maxLostPerLease {
		kept = append(kept[:0], kept[1:]...)
		lh.n--
	}
	e := *ev
	e.Path, e.Owner, e.Value = strings.Clone(e.Path), strings.Clone(e.Owner), nil // the event's strings point into the entry
	lh.byLease[ev.Lease] = append(kept, lostHold{ev: e, at: now})
	lh.order = append(lh.order, ev.Lease)
	lh.n++
	for lh.n > maxLostPerShard && len(lh.order) > 0 {
		lease := lh.order[0]
		lh.order = lh.order[1:]
		if kept := lh.byLease[lease]; len(kept) > 0 {
			lh.dropOldestLocked(lease, kept)
		}
	}
	if len(lh.order) > 2*lh.n+maxLostPerLease {
		lh.compactLocked()
	}
}

func (lh *LostHolds) dropOldestLocked(lease uint64, kept []lostHold) {
	if len(kept) == 1 {
		delete(lh.byLease, lease)
	} else {
		lh.byLease[lease] = kept[1:]
	}
	lh.n--
}

// compactLocked drops the order entries of notices no longer kept.
func (lh *LostHolds) compactLocked() {
	left := make(map[uint64]int, len(lh.byLease))
	for lease, kept := range lh.byLease {
		left[lease] = len(kept)
	}
	var order []uint64
	for i := len(lh.order) - 1; i >= 0; i-- { // the newest entries are the kept ones
		if lease := lh.order[i]; left[lease] > 0 {
			left[lease]--
			order = append(order, lease)
		}
	}
	for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
		order[i], order[j] = order[j], order[i]
	}
	lh.order = order
}

func (lh *LostHolds) forgetLocked(lease uint64) {
	if kept, ok := lh.byLease[lease]; ok {
		lh.n -= len(kept)
		delete(lh.byLease, lease)
	}
}

// recent appends to out the notices of lease applied within keep of now,
// and prunes the older ones.
func (lh *LostHolds) Recent(out []wire.Event, lease uint64, keep time.Duration, now time.Time) []wire.Event {
	lh.mu.Lock()
	defer lh.mu.Unlock()
	kept := lh.byLease[lease]
	i := 0
	for i < len(kept) && now.Sub(kept[i].at) > keep {
		i++
	}
	if i > 0 {
		lh.n -= i
		if i == len(kept) {
			delete(lh.byLease, lease)
			return out
		}
		kept = kept[i:]
		lh.byLease[lease] = kept
	}
	for _, k := range kept {
		out = append(out, k.ev)
	}
	return out
}

// empty reports whether no notice is kept (the common case: keepalive
// answers skip the lookups).
func (lh *LostHolds) Empty() bool {
	lh.mu.Lock()
	defer lh.mu.Unlock()
	return lh.n == 0
}
