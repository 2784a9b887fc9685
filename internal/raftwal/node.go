package raftwal

import (
	"sort"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

type nodeKey struct{ shard, replica uint64 }

// span locates a run of one replica's entries on disk: the entries blob of
// one node record holds indexes base.. ; first..last of them are live.
type span struct {
	first, last uint64
	base        uint64
	seg         uint64
	off         int64 // file offset of the entries blob
	n           int   // blob length
}

// node is what the store keeps in memory for one replica: metadata and
// where its live entries are. Entry payloads stay on disk.
type node struct {
	hasBootstrap bool
	bootstrap    pb.Bootstrap
	hasState     bool
	state        pb.State
	snapshot     pb.Snapshot
	compactedTo  uint64
	spans        []span
}

func (n *node) lastIndex() uint64 {
	if len(n.spans) == 0 {
		return 0
	}
	return n.spans[len(n.spans)-1].last
}

func (n *node) firstIndex() uint64 {
	if len(n.spans) == 0 {
		return 0
	}
	return n.spans[0].first
}

// truncateFrom drops every entry with index >= i (a Raft log conflict).
func (n *node) truncateFrom(i uint64) {
	k := sort.Search(len(n.spans), func(j int) bool { return n.spans[j].last >= i })
	if k < len(n.spans) && n.spans[k].first < i {
		n.spans[k].last = i - 1
		k++
	}
	for j := k; j < len(n.spans); j++ {
		n.spans[j] = span{}
	}
	n.spans = n.spans[:k]
}

// compactTo drops every entry with index <= i.
func (n *node) compactTo(i uint64) {
	if i <= n.compactedTo {
		return
	}
	n.compactedTo = i
	k := sort.Search(len(n.spans), func(j int) bool { return n.spans[j].last > i })
	if k < len(n.spans) && n.spans[k].first <= i {
		n.spans[k].first = i + 1
	}
	if k > 0 {
		n.spans = append(n.spans[:0], n.spans[k:]...)
	}
}

func (n *node) liveBytes() int {
	t := 0
	for _, s := range n.spans {
		t += s.n
	}
	return t
}

// apply changes the node as the record r, written at seg/off (the offset
// of its payload), says. Writing and recovery both go through here, so
// the index after a restart is the index before it.
func (n *node) apply(r *nodeRec, seg uint64, payloadOff int64) {
	if r.flags&fReplace != 0 {
		*n = node{}
	}
	if r.flags&fBootstrap != 0 {
		n.hasBootstrap = true
		n.bootstrap = r.bootstrap
	}
	if r.flags&fSnapshot != 0 && r.snapshot.Index > n.snapshot.Index {
		n.snapshot = r.snapshot
		if r.flags&fSnapshotReset != 0 {
			// The leader sent a snapshot: the log restarts after it
			// (what dragonboat's pebble store does by moving its max index).
			n.spans = n.spans[:0]
		}
	}
	if r.flags&fState != 0 {
		n.hasState = true
		n.state = r.state
	}
	if r.flags&fCompact != 0 {
		n.compactTo(r.compactTo)
	}
	if r.flags&fEntriesAll != 0 {
		n.spans = n.spans[:0]
	}
	if r.flags&fEntries != 0 {
		n.truncateFrom(r.entFirst)
		if len(n.spans) > 0 && n.lastIndex()+1 != r.entFirst {
			// A gap: the older entries can never be read as one log
			// with the new ones. Raft only appends after a snapshot in
			// that case, which resets; keep the new run alone.
			n.spans = n.spans[:0]
		}
		n.spans = append(n.spans, span{
			first: r.entFirst, last: r.entLast, base: r.entFirst,
			seg: seg, off: payloadOff + int64(r.entOff), n: r.entLen,
		})
	}
}
