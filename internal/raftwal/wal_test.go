package raftwal

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/wardenlock/warden/internal/diskfs"
)

func ents(first, last, term uint64) []pb.Entry {
	var out []pb.Entry
	for i := first; i <= last; i++ {
		out = append(out, pb.Entry{Index: i, Term: term, Cmd: []byte(fmt.Sprintf("cmd-%d-%d", i, term))})
	}
	return out
}

func open(t *testing.T, dir string, seg int64) *WAL {
	t.Helper()
	w, err := Open(dir, Options{SegmentSize: seg})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func read(t *testing.T, w *WAL, shard, replica, low, high uint64) []pb.Entry {
	t.Helper()
	es, _, err := w.IterateEntries(nil, 0, shard, replica, low, high, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func sameEntries(t *testing.T, got, want []pb.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Index != want[i].Index || got[i].Term != want[i].Term || string(got[i].Cmd) != string(want[i].Cmd) {
			t.Fatalf("entry %d: got %+v want %+v", i, got[i], want[i])
		}
	}
}

func TestEveryRecordKindRoundTrips(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, 0)
	bs := pb.Bootstrap{Addresses: map[uint64]string{1: "a:1", 2: "b:2"}, Type: pb.RegularStateMachine}
	must(t, w.SaveBootstrapInfo(5, 1, bs))
	must(t, w.SaveRaftState([]pb.Update{
		{ShardID: 5, ReplicaID: 1, State: pb.State{Term: 2, Vote: 1, Commit: 3}, EntriesToSave: ents(1, 10, 2)},
		{ShardID: 6, ReplicaID: 1, State: pb.State{Term: 1, Vote: 2, Commit: 0}},
	}, 1))
	ss := pb.Snapshot{ShardID: 5, Index: 8, Term: 2, Filepath: "/x", FileSize: 99,
		Membership: pb.Membership{Addresses: map[uint64]string{1: "a:1"}}, Type: pb.RegularStateMachine}
	must(t, w.SaveSnapshots([]pb.Update{{ShardID: 5, ReplicaID: 1, Snapshot: ss}}))
	must(t, w.RemoveEntriesTo(5, 1, 4))
	must(t, w.SaveBootstrapInfo(7, 3, bs))
	must(t, w.RemoveNodeData(7, 3))
	check := func(w *WAL) {
		t.Helper()
		got, err := w.GetBootstrapInfo(5, 1)
		must(t, err)
		if !reflect.DeepEqual(got, bs) {
			t.Fatalf("bootstrap %+v", got)
		}
		if _, err := w.GetBootstrapInfo(7, 3); !errors.Is(err, raftio.ErrNoBootstrapInfo) {
			t.Fatalf("removed replica's bootstrap: %v", err)
		}
		nis, _ := w.ListNodeInfo()
		if len(nis) != 1 || nis[0] != (raftio.NodeInfo{ShardID: 5, ReplicaID: 1}) {
			t.Fatalf("node info %+v", nis)
		}
		gs, _ := w.GetSnapshot(5, 1)
		if !reflect.DeepEqual(gs, ss) {
			t.Fatalf("snapshot %+v", gs)
		}
		rs, err := w.ReadRaftState(5, 1, 8)
		must(t, err)
		if rs.State != (pb.State{Term: 2, Vote: 1, Commit: 8}) || rs.FirstIndex != 9 || rs.EntryCount != 2 {
			t.Fatalf("raft state %+v", rs)
		}
		sameEntries(t, read(t, w, 5, 1, 5, 11), ents(5, 10, 2))
		if es := read(t, w, 5, 1, 4, 11); len(es) != 0 {
			t.Fatalf("read below the compaction mark: %d entries", len(es))
		}
		rs, err = w.ReadRaftState(6, 1, 0)
		must(t, err)
		if rs.State.Vote != 2 || rs.EntryCount != 0 {
			t.Fatalf("raft state 6: %+v", rs)
		}
		if _, err := w.ReadRaftState(9, 9, 0); !errors.Is(err, raftio.ErrNoSavedLog) {
			t.Fatalf("unknown replica: %v", err)
		}
	}
	check(w)
	must(t, w.Close())
	w = open(t, dir, 0)
	defer w.Close()
	check(w)
}

func TestConflictReplacesTheTail(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, 0)
	st := pb.State{Term: 1, Commit: 1}
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: st, EntriesToSave: ents(1, 10, 1)}}, 1))
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 2, Commit: 2}, EntriesToSave: ents(6, 7, 2)}}, 1))
	want := append(ents(1, 5, 1), ents(6, 7, 2)...)
	sameEntries(t, read(t, w, 1, 1, 1, 100), want)
	must(t, w.Close())
	w = open(t, dir, 0)
	defer w.Close()
	sameEntries(t, read(t, w, 1, 1, 1, 100), want)
	rs, _ := w.ReadRaftState(1, 1, 0)
	if rs.FirstIndex != 1 || rs.EntryCount != 7 {
		t.Fatalf("range %+v", rs)
	}
}

func TestLeaderSnapshotResetsTheLog(t *testing.T) {
	w := open(t, t.TempDir(), 0)
	defer w.Close()
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 2, State: pb.State{Term: 1, Commit: 3}, EntriesToSave: ents(1, 5, 1)}}, 1))
	ss := pb.Snapshot{ShardID: 1, Index: 100, Term: 3, Type: pb.RegularStateMachine}
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 2, State: pb.State{Term: 3, Commit: 100}, Snapshot: ss}}, 1))
	rs, err := w.ReadRaftState(1, 2, 100)
	must(t, err)
	if rs.EntryCount != 0 || rs.State.Commit != 100 {
		t.Fatalf("after snapshot %+v", rs)
	}
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 2, EntriesToSave: ents(101, 103, 3)}}, 1))
	rs, _ = w.ReadRaftState(1, 2, 100)
	if rs.FirstIndex != 101 || rs.EntryCount != 3 {
		t.Fatalf("after append %+v", rs)
	}
}

// A commit index written without a sync may be lost; the snapshot is
// synced. ReadRaftState must never give a commit below the snapshot.
func TestCommitIsNeverBelowTheSnapshot(t *testing.T) {
	w := open(t, t.TempDir(), 0)
	defer w.Close()
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Commit: 2}, EntriesToSave: ents(1, 20, 1)}}, 1))
	ss := pb.Snapshot{ShardID: 1, Index: 15, Term: 1, Type: pb.RegularStateMachine}
	must(t, w.SaveSnapshots([]pb.Update{{ShardID: 1, ReplicaID: 1, Snapshot: ss}}))
	rs, err := w.ReadRaftState(1, 1, 15)
	must(t, err)
	if rs.State.Commit != 15 || rs.FirstIndex != 16 || rs.EntryCount != 5 {
		t.Fatalf("%+v", rs)
	}
}

func TestCommitOnlyChangesAreNotSynced(t *testing.T) {
	w := open(t, t.TempDir(), 0)
	defer w.Close()
	up := func(st pb.State, e []pb.Entry) {
		must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: st, EntriesToSave: e}}, 1))
	}
	cases := []struct {
		name  string
		st    pb.State
		e     []pb.Entry
		syncs uint64
	}{
		{"entries", pb.State{Term: 1, Commit: 0}, ents(1, 3, 1), 1},
		{"commit only", pb.State{Term: 1, Commit: 2}, nil, 0},
		{"same state", pb.State{Term: 1, Commit: 2}, nil, 0},
		{"vote", pb.State{Term: 1, Vote: 3, Commit: 2}, nil, 1},
		{"term", pb.State{Term: 2, Vote: 3, Commit: 3}, nil, 1},
		{"commit only again", pb.State{Term: 2, Vote: 3, Commit: 3 + 0}, nil, 0},
	}
	for _, c := range cases {
		before := w.Syncs.Load()
		up(c.st, c.e)
		if got := w.Syncs.Load() - before; got != c.syncs {
			t.Fatalf("%s: %d syncs, want %d", c.name, got, c.syncs)
		}
	}
}

func TestCompactionDeletesSegments(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, 8192)
	big := func(first, last uint64) []pb.Entry {
		es := ents(first, last, 1)
		for i := range es {
			es[i].Cmd = make([]byte, 600)
			es[i].Cmd[0] = byte(es[i].Index)
		}
		return es
	}
	// Shard 2 is idle: a handful of entries, never compacted. Rotation
	// copies them forward, so it must not pin old segments.
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 2, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: ents(1, 3, 1)}}, 1))
	for i := uint64(1); i <= 200; i++ {
		must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Commit: i - 1}, EntriesToSave: big(i, i)}}, 1))
	}
	n, _ := listSegments(dir)
	if len(n) < 10 {
		t.Fatalf("only %d segments for 120 KB", len(n))
	}
	ss := pb.Snapshot{ShardID: 1, Index: 190, Term: 1, Type: pb.RegularStateMachine}
	must(t, w.SaveSnapshots([]pb.Update{{ShardID: 1, ReplicaID: 1, Snapshot: ss}}))
	must(t, w.RemoveEntriesTo(1, 1, 190))
	for i := uint64(201); i <= 230; i++ {
		must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Commit: i - 1}, EntriesToSave: big(i, i)}}, 1))
	}
	_, err := w.CompactEntriesTo(1, 1, 190)
	must(t, err)
	after, _ := listSegments(dir)
	if len(after) > 8 {
		t.Fatalf("%d segments left after compaction (before: %d): %v", len(after), len(n), after)
	}
	check := func(w *WAL) {
		t.Helper()
		sameEntries(t, read(t, w, 1, 1, 191, 231), big(191, 230))
		sameEntries(t, read(t, w, 2, 1, 1, 4), ents(1, 3, 1))
		rs, err := w.ReadRaftState(1, 1, 190)
		must(t, err)
		if rs.FirstIndex != 191 || rs.EntryCount != 40 {
			t.Fatalf("%+v", rs)
		}
	}
	check(w)
	must(t, w.Close())
	w = open(t, dir, 8192)
	defer w.Close()
	check(w)
}

// bigEnts are entries large enough that one write spans several sectors
// (without long runs of zeros: see torn).
func bigEnts(first, last uint64) []pb.Entry {
	es := ents(first, last, 1)
	for i := range es {
		for j := 0; j < 700; j++ {
			es[i].Cmd = append(es[i].Cmd, byte(es[i].Index)+byte(j)|1)
		}
	}
	return es
}

// lastWrite makes a store (preallocated or growing: no spare could be
// made) whose newest segment holds entries 1..5 and then, in a last write,
// 6..8. It returns the segment's bytes and where the last write starts and
// ends.
func lastWrite(t *testing.T, prealloc bool) (name string, data []byte, from, to int) {
	t.Helper()
	src := t.TempDir()
	opts := Options{}
	if !prealloc {
		opts.FS = noSpares{diskfs.Disk}
	}
	w, err := Open(src, opts)
	must(t, err)
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Commit: 0}, EntriesToSave: bigEnts(1, 5)}}, 1))
	from = int(w.active().size)
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Commit: 5}, EntriesToSave: bigEnts(6, 8)}}, 1))
	to = int(w.active().size)
	name = segName(w.active().num)
	if capacity := w.active().capacity; prealloc != (capacity > 0) {
		t.Fatalf("prealloc %v: segment capacity %d", prealloc, capacity)
	}
	must(t, w.Close())
	data, err = os.ReadFile(filepath.Join(src, name))
	must(t, err)
	if prealloc && len(data) == to {
		t.Fatalf("preallocated segment is %d bytes, no zeros after the records", len(data))
	}
	// A few sectors of the zeroed space are enough (and keep the test quick).
	return name, data[:min(len(data), to+4*sectorSize)], from, to
}

// replayAsNewest replays data as the newest segment of a store, in memory:
// how many bytes are good and the last entry index of shard 1 replica 1.
func replayAsNewest(data []byte) (int, uint64, error) {
	w := &WAL{nodes: make(map[nodeKey]*node)}
	good, err := w.replay(data, 1, 0, replayNewest)
	var last uint64
	if n := w.nodes[nodeKey{1, 1}]; n != nil {
		last = n.lastIndex()
	}
	return good, last, err
}

// endToEnd: every so many cases also go through Open and a read (the
// rest check replay alone, which is what decides).
const endToEnd = 61

// openCopy writes data as the only segment of a new dir and opens it.
func openCopy(t *testing.T, name string, data []byte) (*WAL, error) {
	t.Helper()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	return Open(dir, Options{NoSync: true})
}

// Cut the last write of the newest segment at every byte: in a growing
// segment the file ends there, in a preallocated one zeros follow. Every
// acknowledged record before it survives, the torn one is dropped, and
// the store opens.
func TestTornTailAtEveryOffset(t *testing.T) {
	for _, prealloc := range []bool{false, true} {
		t.Run(fmt.Sprintf("prealloc=%v", prealloc), func(t *testing.T) {
			name, data, from, to := lastWrite(t, prealloc)
			for cut := from; cut <= to; cut++ {
				torn := append([]byte(nil), data[:cut]...)
				if prealloc {
					torn = append(torn, make([]byte, len(data)-cut)...)
				}
				wantGood, wantLast := from, uint64(5)
				if cut == to {
					wantGood, wantLast = to, 8
				}
				if good, last, err := replayAsNewest(torn); err != nil || good != wantGood || last != wantLast {
					t.Fatalf("cut at %d: replay: %d bytes good, last entry %d, %v", cut, good, last, err)
				}
				if cut%endToEnd != 0 && cut != from && cut != to {
					continue
				}
				w, err := openCopy(t, name, torn)
				if err != nil {
					t.Fatalf("cut at %d: %v", cut, err)
				}
				want := bigEnts(1, 5)
				if cut == to {
					want = bigEnts(1, 8)
				}
				sameEntries(t, read(t, w, 1, 1, 1, 100), want)
				w.Close()
			}
		})
	}
}

// In preallocated space a write can reach the disk in part, sector by
// sector in any order: with any one sector of the last write missing
// (zeros), that write is dropped and the rest survives.
func TestTornSectorInPreallocatedSegment(t *testing.T) {
	name, data, from, to := lastWrite(t, true)
	if to-from < 3*sectorSize {
		t.Fatalf("last write is only %d bytes", to-from)
	}
	for s := from &^ (sectorSize - 1); s < to; s += sectorSize {
		torn := append([]byte(nil), data...)
		lo := max(s, from)
		clear(torn[lo:min(s+sectorSize, to)])
		if good, last, err := replayAsNewest(torn); err != nil || good != from || last != 5 {
			t.Fatalf("sector at %d missing: replay: %d bytes good, last entry %d, %v", s, good, last, err)
		}
		w, err := openCopy(t, name, torn)
		if err != nil {
			t.Fatalf("sector at %d missing: %v", s, err)
		}
		sameEntries(t, read(t, w, 1, 1, 1, 100), bigEnts(1, 5))
		w.Close()
	}
}

// A flipped bit anywhere in a record that is not the newest segment's
// last is damage to acknowledged data: Open refuses, in growing and
// preallocated segments.
func TestFlippedBitIsAnError(t *testing.T) {
	for _, prealloc := range []bool{false, true} {
		t.Run(fmt.Sprintf("prealloc=%v", prealloc), func(t *testing.T) {
			name, data, from, _ := lastWrite(t, prealloc)
			for at := 0; at < from; at++ {
				bit := byte(1) << (at % 8)
				b := append([]byte(nil), data...)
				b[at] ^= bit
				if _, _, err := replayAsNewest(b); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("bit %#x flipped at %d of %d: replay gave %v", bit, at, from, err)
				}
				if at%endToEnd != 0 {
					continue
				}
				if w, err := openCopy(t, name, b); !errors.Is(err, ErrCorrupt) {
					if err == nil {
						w.Close()
					}
					t.Fatalf("bit %#x flipped at %d of %d: Open gave %v", bit, at, from, err)
				}
			}
		})
	}
}

func TestFlippedBitInOlderSegmentIsAnError(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, 0)
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: ents(1, 5, 1)}}, 1))
	first := w.active().num
	used := map[uint64]int{first: int(w.active().size)}
	must(t, w.Close())
	w = open(t, dir, 0) // starts a newer segment; keeps the first (live entries... or copies)
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, EntriesToSave: ents(6, 6, 1)}}, 1))
	used[w.active().num] = int(w.active().size)
	must(t, w.Close())
	nums, _ := listSegments(dir)
	// Damage a byte in the middle of the oldest segment's records,
	// and separately in the middle (not the tail) of the newest's.
	for _, target := range []uint64{nums[0], nums[len(nums)-1]} {
		copyDir := t.TempDir()
		for _, n := range nums {
			b, _ := os.ReadFile(filepath.Join(dir, segName(n)))
			if n == target {
				b[used[n]/2] ^= 0x10
			}
			must(t, os.WriteFile(filepath.Join(copyDir, segName(n)), b, 0o644))
		}
		if _, err := Open(copyDir, Options{NoSync: true}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("segment %d (first %d) damaged: Open gave %v", target, first, err)
		}
	}
}

// model is what the store must hold: per replica the state, snapshot,
// bootstrap and the log after compaction.
type modelNode struct {
	st      pb.State
	hasSt   bool
	ss      pb.Snapshot
	log     map[uint64]pb.Entry
	last    uint64
	compact uint64
}

// TestRandomAgainstModel: random appends (with conflicts), commits,
// snapshots with compaction, restarts and crashes (the files copied as
// they are) on 4 KiB segments, so that segments are recycled again and
// again; the store must always match the model.
func TestRandomAgainstModel(t *testing.T) {
	seed := int64(os.Getpid())
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	w := open(t, dir, 4096)
	defer func() { w.Close() }()
	model := map[nodeKey]*modelNode{}
	get := func(k nodeKey) *modelNode {
		if model[k] == nil {
			model[k] = &modelNode{log: map[uint64]pb.Entry{}}
		}
		return model[k]
	}
	term := uint64(1)
	recycled := uint64(0)
	defer func() {
		// Many rotations, some onto recycled segments (how many depends on
		// the background filler: a spare it made first is kept).
		if recycled += w.SparesRecycled.Load(); recycled < 5 && !t.Failed() {
			t.Errorf("seed %d: only %d segments recycled", seed, recycled)
		}
	}()
	for step := 0; step < 3000; step++ {
		k := nodeKey{uint64(1 + rng.Intn(3)), 1}
		m := get(k)
		switch op := rng.Intn(20); {
		case op < 12: // append, sometimes with a conflict
			first := m.last + 1
			if m.last > m.compact+1 && rng.Intn(5) == 0 {
				first = m.compact + 2 + uint64(rng.Intn(int(m.last-m.compact-1)))
				// Raft never replaces committed entries.
				first = max(first, m.ss.Index+1, m.st.Commit+1)
				if first > m.last+1 {
					first = m.last + 1
				}
				term++
			}
			n := uint64(1 + rng.Intn(4))
			es := ents(first, first+n-1, term)
			for i := first; i <= m.last; i++ {
				delete(m.log, i)
			}
			for _, e := range es {
				m.log[e.Index] = e
			}
			m.last = first + n - 1
			st := pb.State{Term: term, Commit: m.st.Commit}
			must(t, w.SaveRaftState([]pb.Update{{ShardID: k.shard, ReplicaID: 1, State: st, EntriesToSave: es}}, 1))
			m.st, m.hasSt = st, true
		case op < 15 && m.hasSt: // commit only
			if m.st.Commit < m.last {
				m.st.Commit++
				must(t, w.SaveRaftState([]pb.Update{{ShardID: k.shard, ReplicaID: 1, State: m.st}}, 1))
			}
		case op < 17 && m.st.Commit > m.ss.Index: // snapshot then compaction
			ss := pb.Snapshot{ShardID: k.shard, Index: m.st.Commit, Term: term, Type: pb.RegularStateMachine}
			must(t, w.SaveSnapshots([]pb.Update{{ShardID: k.shard, ReplicaID: 1, Snapshot: ss}}))
			m.ss = ss
			if ss.Index > 2 {
				c := ss.Index - 2
				must(t, w.RemoveEntriesTo(k.shard, 1, c))
				for i := m.compact + 1; i <= c; i++ {
					delete(m.log, i)
				}
				m.compact = c
				_, err := w.CompactEntriesTo(k.shard, 1, c)
				must(t, err)
			}
		case op == 18 && rng.Intn(8) == 0: // crash: the files as they are, without Close
			recycled += w.SparesRecycled.Load()
			dir = copyDir(t, dir)
			must(t, w.Close())
			w = open(t, dir, 4096)
		case op == 19 && rng.Intn(8) == 0: // restart
			recycled += w.SparesRecycled.Load()
			must(t, w.Close())
			w = open(t, dir, 4096)
		}
		if step%50 == 0 || step == 2999 {
			for k, m := range model {
				if !m.hasSt {
					continue
				}
				rs, err := w.ReadRaftState(k.shard, 1, m.ss.Index)
				if err != nil {
					t.Fatalf("seed %d step %d %v: %v", seed, step, k, err)
				}
				if rs.State.Term != m.st.Term || rs.State.Commit < m.ss.Index {
					t.Fatalf("seed %d step %d: state %+v, model %+v", seed, step, rs.State, m.st)
				}
				if rs.EntryCount > 0 && rs.FirstIndex+rs.EntryCount-1 != m.last {
					t.Fatalf("seed %d step %d: range %+v, last %d", seed, step, rs, m.last)
				}
				var want []pb.Entry
				for i := m.compact + 1; i <= m.last; i++ {
					want = append(want, m.log[i])
				}
				if m.last > m.compact {
					sameEntries(t, read(t, w, k.shard, 1, m.compact+1, m.last+1), want)
				}
			}
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A slow replica far from its next snapshot must not keep every segment
// the busy ones write: its live entries are copied forward at rotation.
func TestSlowReplicaDoesNotPinSegments(t *testing.T) {
	dir := t.TempDir()
	const seg = 64 << 10
	w := open(t, dir, seg)
	defer w.Close()
	payload := func(first, last uint64, size int) []pb.Entry {
		es := ents(first, last, 1)
		for i := range es {
			es[i].Cmd = make([]byte, size)
		}
		return es
	}
	slow := uint64(0)
	for i := uint64(1); i <= 3000; i++ {
		ups := []pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Commit: i - 1}, EntriesToSave: payload(i, i, 500)}}
		if i%10 == 0 {
			slow++
			ups = append(ups, pb.Update{ShardID: 2, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: payload(slow, slow, 30)})
		}
		must(t, w.SaveRaftState(ups, 1))
		if i%200 == 0 { // the busy replica snapshots and compacts
			snapshotAndCompact(t, w, 1, i-50, i-60)
		}
	}
	nums, _ := listSegments(dir)
	// About 1.5 MB written; the live data is about 30 KB + 300 x 45 B.
	if len(nums) > 6 {
		t.Fatalf("%d segments kept: %v", len(nums), nums)
	}
	sameEntries(t, read(t, w, 2, 1, 1, slow+1), payload(1, slow, 30))
}
