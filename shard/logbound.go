package shard

import (
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	sm "github.com/lni/dragonboat/v4/statemachine"
)

// The Raft log is bounded by bytes as well as by entries. dragonboat takes
// a snapshot every SnapshotEntries entries, but an entry carries from one
// operation to MaxBatchOps of them: under load a shard leader packs
// hundreds of operations into each entry, and 125,000 entries (the default
// with its compaction overhead) measured 2 GB of log per replica at 130k
// lock ops/s. Each replica therefore also asks for a snapshot of its own
// state once the entries it applied since its last one hold
// SnapshotLogBytes bytes, and keeps a quarter of that behind it, so the log
// on disk and what a restart replays stay bounded whatever an entry holds.

// logBound counts the entry bytes a replica applied since its last
// snapshot and asks for one past the limit. Its counts change under the
// state machine's lock (Update and PrepareSnapshot are exclusive), so a
// snapshot resets exactly what it covers.
type logBound struct {
	limit   int64
	bytes   atomic.Int64 // entry bytes applied since the last snapshot was prepared
	entries atomic.Int64 // entries applied since then
	asked   atomic.Bool  // a request is in flight (or backing off after a failure)
	// request asks for a snapshot that keeps the newest keep entries in
	// the log; it runs on its own goroutine and must clear asked.
	request func(keep uint64)
}

// applied counts entries that were just applied and asks for a snapshot
// when they take the log past the limit.
func (b *logBound) applied(entries []sm.Entry) {
	if b == nil || b.limit <= 0 {
		return
	}
	var n int64
	for i := range entries {
		n += int64(len(entries[i].Cmd))
	}
	total := b.bytes.Add(n)
	count := b.entries.Add(int64(len(entries)))
	if total < b.limit || !b.asked.CompareAndSwap(false, true) {
		return
	}
	go b.request(keepEntries(count, total, b.limit))
}

// prepared resets the counts: a snapshot of the state as of now is being
// taken (by this bound's request or by the entry count).
func (b *logBound) prepared() {
	if b == nil {
		return
	}
	b.bytes.Store(0)
	b.entries.Store(0)
}

// keepEntries is how many of the newest entries a snapshot leaves in the
// log: those of about a quarter of the limit, at the average size of the
// entries applied since the last snapshot (at least one).
func keepEntries(entries, bytes, limit int64) uint64 {
	if entries <= 0 || bytes <= 0 {
		return 1
	}
	keep := float64(entries) * float64(limit) / float64(4*bytes)
	return uint64(max(1, min(keep, float64(entries)/4)))
}

const (
	// logSnapshotRetry is how long a replica waits after a snapshot
	// request that failed before it may ask again.
	logSnapshotRetry = 5 * time.Second
	// logSnapshotTimeout bounds the wait for a requested snapshot (a large
	// state takes seconds to write).
	logSnapshotTimeout = time.Minute
)

// requestLogSnapshot asks dragonboat for a snapshot of the local replica
// that compacts the log up to its newest keep entries, and waits for it
// (logBound.request).
func (s *Shard) requestLogSnapshot(keep uint64) {
	b := s.bound
	ok := false
	defer func() {
		if !ok {
			select {
			case <-time.After(logSnapshotRetry):
			case <-s.stopc:
			}
		}
		b.asked.Store(false)
	}()
	rs, err := s.nh.RequestSnapshot(s.id, dragonboat.SnapshotOption{OverrideCompactionOverhead: true, CompactionOverhead: keep},
		logSnapshotTimeout)
	if err != nil {
		s.log.Debug("log-size snapshot not requested", "shard", s.id, "err", err)
		return
	}
	defer rs.Release()
	select {
	case r := <-rs.ResultC():
		ok = r.Completed()
		if !ok {
			s.log.Debug("log-size snapshot not taken", "shard", s.id, "rejected", r.Rejected(), "timeout", r.Timeout())
		}
	case <-s.stopc:
	}
}
