package raftwal

import (
	"testing"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// sized returns entries first..last of term 1 whose commands are size
// bytes, derived from shard and index so that reads can be checked.
func sized(shard, first, last uint64, size int) []pb.Entry {
	es := make([]pb.Entry, 0, last-first+1)
	for i := first; i <= last; i++ {
		cmd := make([]byte, size)
		for j := range cmd {
			cmd[j] = byte(shard*31 + i + uint64(j))
		}
		es = append(es, pb.Entry{Index: i, Term: 1, Cmd: cmd})
	}
	return es
}

// openSmall opens a store on 64 KiB segments, spares made inline, no sync.
func openSmall(t *testing.T) (w *WAL, dir string, opts Options) {
	t.Helper()
	opts = Options{SegmentSize: 64 << 10, NoSync: true, fillInline: true}
	dir = t.TempDir()
	w, err := Open(dir, opts)
	must(t, err)
	return w, dir, opts
}

// snapshotAndCompact saves a snapshot of shard (replica 1) at index snap
// and drops its entries up to through, as dragonboat does after one.
func snapshotAndCompact(t *testing.T, w *WAL, shard, snap, through uint64) {
	t.Helper()
	must(t, w.SaveSnapshots([]pb.Update{{ShardID: shard, ReplicaID: 1,
		Snapshot: pb.Snapshot{ShardID: shard, Index: snap, Term: 1, Type: pb.RegularStateMachine}}}))
	must(t, w.RemoveEntriesTo(shard, 1, through))
	_, err := w.CompactEntriesTo(shard, 1, through)
	must(t, err)
}

// Eight busy replicas with similar logs pin the oldest segment together:
// none of them is copied wholesale at rotation (copying all of them under
// the store's lock kept every writer of the node waiting about 2 s), no
// rotation copies more than its budget, and their
// own compactions still free the old segments.
func TestSimilarReplicasAreNotCopiedAtRotation(t *testing.T) {
	w, dir, opts := openSmall(t)
	const replicas, size, every, keep = 8, 100, 60, 20
	st := w.Stats()
	last := uint64(0)
	rotations := 0
	var snapAt [replicas + 1]uint64
	for last < 3000 {
		last++
		ups := make([]pb.Update, 0, replicas)
		for s := uint64(1); s <= replicas; s++ {
			ups = append(ups, pb.Update{ShardID: s, ReplicaID: 1, State: pb.State{Term: 1, Commit: last - 1},
				EntriesToSave: sized(s, last, last, size)})
		}
		before := st.Rotations()
		must(t, w.SaveRaftState(ups, 1))
		after := st.Rotations()
		if copied := after.CopiedBytes - before.CopiedBytes; copied > uint64(w.copyBudget()) {
			t.Fatalf("entry %d: one rotation copied %d bytes, over the budget of %d", last, copied, w.copyBudget())
		}
		rotations += int(after.Count - before.Count)
		// Every replica snapshots and compacts at its own point, as
		// dragonboat's replicas of different shards do.
		for s := uint64(1); s <= replicas; s++ {
			if (last+s*7)%every != 0 || last <= keep {
				continue
			}
			snapshotAndCompact(t, w, s, last-1, last-keep)
			snapAt[s] = last - 1
		}
	}
	if rotations < 10 {
		t.Fatalf("only %d rotations: the test does not exercise them", rotations)
	}
	// About 3000 x 8 x 110 B = 2.6 MB written, 8 x at most 80 entries live.
	nums, _ := listSegments(dir)
	if len(nums) > 6 {
		t.Fatalf("%d segments kept after %d rotations: %v", len(nums), rotations, nums)
	}
	check := func(w *WAL) {
		t.Helper()
		for s := uint64(1); s <= replicas; s++ {
			rs, err := w.ReadRaftState(s, 1, snapAt[s])
			must(t, err)
			first := rs.FirstIndex
			if first == 0 || rs.FirstIndex+rs.EntryCount-1 != last {
				t.Fatalf("shard %d: raft state %+v, last entry %d", s, rs, last)
			}
			sameEntries(t, read(t, w, s, 1, first, last+1), sized(s, first, last, size))
		}
	}
	check(w)
	must(t, w.Close())
	w, err := Open(dir, opts)
	must(t, err)
	check(w)
	must(t, w.Close())
}

// Idle replicas never snapshot, so only rotation copies free the segments
// they pin. When too many of them share the oldest segment for one
// rotation's budget, each rotation moves some forward, and the segments
// are freed over a few rotations instead of never.
func TestIdleReplicasMoveOutOfOldSegments(t *testing.T) {
	w, dir, opts := openSmall(t)
	// 40 idle replicas of about 1 KiB each: 40 KiB, over the 16 KiB budget.
	const idle, idleSize = 40, 1000
	for s := uint64(101); s < 101+idle; s++ {
		must(t, w.SaveRaftState([]pb.Update{{ShardID: s, ReplicaID: 1, State: pb.State{Term: 1},
			EntriesToSave: sized(s, 1, 1, idleSize)}}, 1))
	}
	// One busy replica writes about 1.5 MB, compacting as it goes.
	last := uint64(0)
	for last < 3000 {
		last++
		must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Commit: last - 1},
			EntriesToSave: sized(1, last, last, 500)}}, 1))
		if last%40 == 0 {
			snapshotAndCompact(t, w, 1, last-1, last-10)
		}
	}
	nums, _ := listSegments(dir)
	if len(nums) > 6 {
		t.Fatalf("%d segments kept: %v", len(nums), nums)
	}
	if r := w.Stats().Rotations(); r.CopiedReplicas < idle {
		t.Fatalf("%d replicas copied, want at least the %d idle ones", r.CopiedReplicas, idle)
	}
	check := func(w *WAL) {
		t.Helper()
		for s := uint64(101); s < 101+idle; s++ {
			sameEntries(t, read(t, w, s, 1, 1, 2), sized(s, 1, 1, idleSize))
		}
		sameEntries(t, read(t, w, 1, 1, last-9, last+1), sized(1, last-9, last, 500))
	}
	check(w)
	must(t, w.Close())
	w, err := Open(dir, opts)
	must(t, err)
	check(w)
	must(t, w.Close())
}
