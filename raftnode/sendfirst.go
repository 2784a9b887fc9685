package raftnode

import (
	"runtime"
	"sync"
	"sync/atomic"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// The Replicate first, then the leader's sync. dragonboat's step worker
// hands a pass's Replicates to its per-peer send goroutines and then saves
// the same entries, which ends in an fdatasync (raft thesis 10.2.1: the
// leader writes its log in parallel with the followers). The send
// goroutines are made runnable on the step worker's P, and the sync blocks
// that P's thread: unless another P is idle and steals them at once, they
// wait until the runtime takes the P back from the syscall, or until the
// sync returns (in a contended run's trace the leader's send goroutines
// wait 34 µs at p50 and 208 µs at p90 after each wake-up). The
// follower's sync then starts after the leader's instead of beside it, and
// a lock hand-off, which waits for one of each, pays both in series.
//
// So before a save of entries proposed to an idle pipeline (the
// Replicate's LogIndex equals its Commit: nothing before its entries is
// uncommitted, as for a hand-off or a lone client, whose round nothing else
// overlaps), a step worker whose Replicate no send goroutine has taken up
// yet yields once: the send goroutine waiting on its P runs first. When
// another P already took it (an idle machine), it does not yield and the
// sync starts at once. Pipelined entries never yield (yielding there puts
// the step worker behind every runnable router goroutine).

// sentEntries records, per shard, the highest log index a send goroutine
// of this process has framed for a peer in a Replicate: the goroutine that
// framed it writes it next. It only steers a yield: where several hosts of
// one process (tests) lead the same shard id, a mix-up costs a yield more
// or less, never a message.
var sentEntries sync.Map // shard id → *atomic.Uint64

// noteSent records the Replicates of a batch about to be written.
func noteSent(reqs []pb.Message) {
	for i := range reqs {
		m := &reqs[i]
		if m.Type != pb.Replicate || len(m.Entries) == 0 {
			continue
		}
		last := m.LogIndex + uint64(len(m.Entries))
		v, ok := sentEntries.Load(m.ShardID)
		if !ok {
			v, _ = sentEntries.LoadOrStore(m.ShardID, new(atomic.Uint64))
		}
		a := v.(*atomic.Uint64)
		for cur := a.Load(); cur < last && !a.CompareAndSwap(cur, last); cur = a.Load() {
		}
	}
}

func sentUpTo(shardID uint64) uint64 {
	if v, ok := sentEntries.Load(shardID); ok {
		return v.(*atomic.Uint64).Load()
	}
	return 0
}

// sendFirst yields once if a leader's update in updates replicates entries
// on an idle pipeline and no send goroutine has framed them yet. It
// reports whether it yielded.
func sendFirst(updates []pb.Update) bool {
	for i := range updates {
		u := &updates[i]
		if want := idleReplicate(u); want > 0 && sentUpTo(u.ShardID) < want {
			runtime.Gosched()
			return true
		}
	}
	return false
}

// idleReplicate is the last index of the entries u sends in a Replicate
// to an idle pipeline, or 0.
func idleReplicate(u *pb.Update) uint64 {
	var want uint64
	for j := range u.Messages {
		m := &u.Messages[j]
		if m.Type == pb.Replicate && len(m.Entries) > 0 && m.LogIndex == m.Commit {
			want = max(want, m.LogIndex+uint64(len(m.Entries)))
		}
	}
	return want
}
