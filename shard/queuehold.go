package shard

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/wardenlock/warden/wire"
)

// On a hot lock every hand-off is one Raft round, and the rounds are in
// series: the next holder learns of its grant from the entry that released
// the lock and only then sends its own release. The previous holder's next
// acquire reaches the leader at about the same time as that release; when it
// goes first, in an entry of its own, the step worker syncs that entry before
// it sends the release's, so the hand-off waits for one more sync on the
// leader and the followers, and every such entry costs each replica a log
// write and about nine Raft messages. Yet that acquire can only queue: the
// path already has waiters, and no request barges past a queued one. (The
// exceptions are answered at once whatever the queue: an owner asking again
// for a lock it holds, an upgrade, a self-conflict. For them the hold is a
// delay of at most Config.QueueHold, nothing else.)
//
// So a blocking acquire on a path with queued waiters is held back briefly
// and proposed with the next operation that reaches the proposer (typically
// the holder's release), or on its own after Config.QueueHold. Holding it changes
// nothing in what is decided: it is applied in the same order relative to
// every other operation of this proposer (held operations go first in the
// entry they join), and it would have been queued behind the same waiters.
// It changes only when it joins the queue, which is never earlier than a
// release it could have been granted by. Measured: +31 % hand-offs/s on
// one hot lock (32 clients, 1 shard; median of 4 alternated pairs against
// --queue-hold 0).

// waitCounts counts the queued waiters per path on this replica, from the
// applied events. It is a hint for the proposer, not state: a count never
// goes below zero, and it starts from zero when the process starts and when
// the replica becomes leader, so waiters it never saw queue (restored from a
// snapshot) are missed, which only means their path is not held back, and
// waiters that left in entries it never applied one by one (a follower
// catching up from a snapshot) are not counted on a leader.
type waitCounts struct {
	mu    sync.Mutex
	n     map[string]int
	paths atomic.Int64 // len(n): the proposer's cheap "none" check
}

// observe updates the counts from one applied entry's events.
func (w *waitCounts) observe(ev *wire.Event) {
	var d int
	switch {
	case ev.Kind == wire.EvQueued:
		d = 1
	case ev.Kind == wire.EvDequeued, ev.Kind == wire.EvAcquired && ev.Cause == wire.CauseHandOff:
		d = -1
	default:
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = make(map[string]int)
	}
	switch c := w.n[ev.Path] + d; {
	case c > 0:
		w.n[ev.Path] = c
	case d < 0:
		delete(w.n, ev.Path)
	}
	w.paths.Store(int64(len(w.n)))
}

// reset forgets every count (the replica became leader).
func (w *waitCounts) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.n)
	w.paths.Store(0)
}

// queued reports whether path has waiters.
func (w *waitCounts) queued(path string) bool {
	if w.paths.Load() == 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[path] > 0
}

// mustQueue reports whether every proposal in batch is a blocking acquire on
// a path that has waiters, i.e. whether the whole batch can wait for the next
// operation.
func (w *waitCounts) mustQueue(batch []proposal) bool {
	if w.paths.Load() == 0 {
		return false
	}
	for _, b := range batch {
		r := b.req
		if r.Op != wire.OpAcquire || r.Wait == wire.WaitNone || r.Client == 0 || !w.queued(r.Path) {
			return false
		}
	}
	return true
}

// queueHold is the proposer's set of held acquires (proposer goroutine only).
//
// Config.QueueHold bounds how long an acquire is held back: a hand-off on
// the benchmark machine takes about a millisecond, so the next release
// usually comes first; when it does not (a long hold), the acquire goes
// alone, as before.
type queueHold struct {
	max     time.Duration // Config.QueueHold; <= 0: nothing is held
	held    []proposal
	timer   *time.Timer
	running bool // the timer runs: it started with the oldest held operation
}

// expiry returns the channel that fires when the held acquires must go, nil
// when none is held.
func (h *queueHold) expiry() <-chan time.Time {
	if len(h.held) == 0 {
		return nil
	}
	return h.timer.C
}

// expired notes that the timer fired (its value was received).
func (h *queueHold) expired() { h.running = false }

// hold keeps batch back; the bound counts from the oldest held operation.
func (h *queueHold) hold(batch []proposal) {
	if !h.running {
		if h.timer == nil {
			h.timer = time.NewTimer(h.max)
		} else {
			h.timer.Reset(h.max)
		}
		h.running = true
	}
	h.held = append(h.held[:0], batch...)
}

// take appends the held operations to batch (they go first in the next
// entry) and forgets them; the timer keeps running for hold.
func (h *queueHold) take(batch []proposal) []proposal {
	batch = append(batch, h.held...)
	clear(h.held)
	h.held = h.held[:0]
	return batch
}

// release stops the timer: what was held is being proposed.
func (h *queueHold) release() {
	if h.running {
		h.timer.Stop()
		h.running = false
	}
}
