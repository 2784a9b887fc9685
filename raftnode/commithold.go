package raftnode

import (
	"time"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// Commit-only Replicates, held briefly. When a leader's commit index
// advances, dragonboat broadcasts a Replicate to every follower
// (dragonboat's raft.go: handleLeaderReplicateResp → tryCommit →
// broadcastReplicateMessage); to a follower that already has every entry it
// carries none, only LogIndex/LogTerm (the follower's next-1 and its term)
// and Commit (the leader's commit index). The follower steps it, writes its
// new commit index and answers with a ReplicateResp: at one contended lock
// hand-off that is 4 of ≈ 9 Raft messages, and ≈ 6 % of the hand-off's CPU.
// Often the next message to that follower
// of that shard, a Replicate with the next entries or a heartbeat, carries
// the same commit index a moment later. So the transport holds a
// commit-only Replicate per (shard, follower) for DefaultCommitHold and drops
// it if a later message of the shard to the follower carries at least the
// commit it would have taught; otherwise it sends it when the hold ends, or
// just ahead of the later message that does not carry it.
//
// Why it is safe. Raft (and dragonboat) tolerate lost, delayed and
// duplicated messages: a held message is a delayed one, a dropped one is a
// lost one, and neither can break safety; what changes is only when a
// follower learns the commit index (the leader's commit, and so every
// answer the leader gives, is unchanged). The hold never reorders: a held
// message goes out before any later message of its (shard, follower) that
// does not supersede it, in the same frame stream, so the follower sees
// the leader's messages in the order the leader sent them, less the
// dropped ones. A later message supersedes a held one only if it is of the
// same term and the follower adopts at least the same commit from it:
// a Replicate with LogIndex at or past the held one's (so it also checks
// the log at least as far: a follower that lost entries rejects it and
// the leader backs off, as the held message would have made it) and
// min(LogIndex+len(Entries), Commit) at or past the held one's
// min(LogIndex, Commit); or a heartbeat, whose Commit (min(match, commit),
// committed unconditionally) is at or past it (its response makes the
// leader resend anything the follower lacks, as the held message's
// rejection would have). Liveness: a held message is sent within
// the hold, or was replaced by one carrying its commit; only a
// closing transport or stream discards held messages (as it discards
// queued ones), and the next heartbeat (HeartbeatRTT, 30 ms) carries the
// commit then.
//
// What waits on a follower's commit index, and so may wait up to
// the hold longer: a follower's SyncRead (ReadIndex: the leader's
// answer is not delayed, the follower then waits to apply the read
// index), a stale read on a follower (it sees state up to that much
// older, which a stale read allows), a moved-in replica's catch-up check
// (control/replicas.go, a SyncRead), and status figures (applied index per
// replica: node status, metrics, the chaos suite's convergence checks,
// which poll). Leader transfer waits for the target's match, not its
// commit, and TimeoutNow goes out behind any held message of its shard
// (it does not supersede one); a new leader commits an entry of its own
// term before it serves. Log compaction and snapshots depend on the
// leader's and each node's own applied index, which the hold does not
// change. None of these needs the commit sooner than a millisecond.

// DefaultCommitHold is how long a commit-only Replicate waits for a
// message that makes it redundant. A millisecond is below the Raft round
// of a hand-off (2–3 ms) and far below a heartbeat (30 ms).
const DefaultCommitHold = time.Millisecond

// isCommitOnly says whether m is a Replicate without entries. (A probe
// after a rejection or a heartbeat's answer may be one too; holding it is
// as safe, see above.)
func isCommitOnly(m *pb.Message) bool {
	return m.Type == pb.Replicate && len(m.Entries) == 0
}

// commitReach is the commit index a follower adopts when it accepts m
// (handleReplicateMessage, handleHeartbeatMessage), and whether m teaches
// one at all.
func commitReach(m *pb.Message) (uint64, bool) {
	switch m.Type {
	case pb.Replicate:
		return min(m.LogIndex+uint64(len(m.Entries)), m.Commit), true
	case pb.Heartbeat:
		return m.Commit, true
	}
	return 0, false
}

// supersedes says whether later, sent after held to the same replica of
// the same shard, makes held redundant (see the safety note above).
func supersedes(later, held *pb.Message) bool {
	if later.Term != held.Term {
		return false
	}
	if later.Type == pb.Replicate && later.LogIndex < held.LogIndex {
		return false
	}
	reach, ok := commitReach(later)
	if !ok {
		return false
	}
	want, _ := commitReach(held)
	return reach >= want
}

type holdKey struct{ shard, to uint64 }

type heldCommit struct {
	m   pb.Message // has no entries: a copy keeps nothing of the caller's batch
	due time.Time
}

// commitHold is one peer's held messages, at most one per replica of each
// shard. It is not safe for concurrent use (pairConn guards it with its
// mutex) and reads no clock: callers pass the time.
type commitHold struct {
	wait time.Duration
	held map[holdKey]heldCommit
}

func newCommitHold(wait time.Duration) *commitHold {
	return &commitHold{wait: wait, held: map[holdKey]heldCommit{}}
}

// admit takes a batch's messages in order and appends to out, in order,
// those to send now: every message that is not held, each preceded by the
// held message of its (shard, replica) unless it supersedes it (then that
// one is dropped), and at the end the held messages due by now.
func (h *commitHold) admit(out, in []pb.Message, now time.Time) []pb.Message {
	for i := range in {
		m := &in[i]
		k := holdKey{m.ShardID, m.To}
		if len(h.held) > 0 {
			if hc, ok := h.held[k]; ok {
				delete(h.held, k)
				if supersedes(m, &hc.m) {
					holdCounts.dropped.Add(1)
				} else {
					holdCounts.released.Add(1)
					out = append(out, hc.m)
				}
			}
		}
		if isCommitOnly(m) {
			h.held[k] = heldCommit{m: *m, due: now.Add(h.wait)}
			holdCounts.held.Add(1)
			continue
		}
		out = append(out, *m)
	}
	return h.due(out, now)
}

// due appends the held messages due by until to out and forgets them.
func (h *commitHold) due(out []pb.Message, until time.Time) []pb.Message {
	for k, hc := range h.held {
		if !hc.due.After(until) {
			delete(h.held, k)
			holdCounts.released.Add(1)
			out = append(out, hc.m)
		}
	}
	return out
}

// next is when the earliest held message is due.
func (h *commitHold) next() (time.Time, bool) {
	var first time.Time
	for _, hc := range h.held {
		if first.IsZero() || hc.due.Before(first) {
			first = hc.due
		}
	}
	return first, !first.IsZero()
}

// discard forgets every held message (the connection is closing).
func (h *commitHold) discard() {
	holdCounts.discarded.Add(uint64(len(h.held)))
	clear(h.held)
}
