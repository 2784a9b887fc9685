package raftwal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/wardenlock/warden/internal/diskfs"
)

// recycling drives one replica (bigEnts, snapshot and compaction every 5
// entries, keeping 2) on 16 KiB segments with spares made inline, so that dead
// segments are recycled at known points.
type recycling struct {
	t    *testing.T
	dir  string
	opts Options
	w    *WAL
	last uint64 // last entry index saved
}

func newRecycling(t *testing.T, atStep func(string)) *recycling {
	r := &recycling{t: t, dir: t.TempDir(), opts: Options{SegmentSize: 16 << 10, fillInline: true, atStep: atStep}}
	var err error
	r.w, err = Open(r.dir, r.opts)
	must(t, err)
	return r
}

func (r *recycling) save(n int) {
	r.t.Helper()
	for range n {
		i := r.last + 1
		must(r.t, r.w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Commit: i - 1}, EntriesToSave: bigEnts(i, i)}}, 1))
		r.last = i
		if i%5 == 0 {
			must(r.t, r.w.SaveSnapshots([]pb.Update{{ShardID: 1, ReplicaID: 1, Snapshot: pb.Snapshot{ShardID: 1, Index: i - 1, Term: 1, Type: pb.RegularStateMachine}}}))
			must(r.t, r.w.RemoveEntriesTo(1, 1, i-2))
			_, err := r.w.CompactEntriesTo(1, 1, i-2)
			must(r.t, err)
		}
	}
}

// untilRecycledActive saves until the active segment is a recycled file
// holding records after its checkpoint, with room for more: stale bytes
// of its previous life follow the records.
func (r *recycling) untilRecycledActive() {
	r.t.Helper()
	for range 2000 {
		if a := r.w.active(); a.recycled && a.size > a.head && a.size < a.capacity/2 {
			return
		}
		r.save(1)
	}
	r.t.Fatalf("no recycled segment after %d entries (%d recycled)", r.last, r.w.SparesRecycled.Load())
}

// live is what the store must return for shard 1: entries after the
// compaction mark.
func (r *recycling) check(w *WAL) {
	r.t.Helper()
	low := compactedBelow(r.last) + 1
	sameEntries(r.t, read(r.t, w, 1, 1, low, r.last+1), bigEnts(low, r.last))
	rs, err := w.ReadRaftState(1, 1, low-1)
	must(r.t, err)
	if rs.FirstIndex+rs.EntryCount-1 != r.last {
		r.t.Fatalf("raft state %+v, last entry %d", rs, r.last)
	}
}

// compactedBelow is recycling's compaction mark after entry last.
func compactedBelow(last uint64) uint64 {
	if last < 5 {
		return 0
	}
	return last/5*5 - 2
}

// copyDir copies the segment and spare files of src into a new dir.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	des, err := os.ReadDir(src)
	must(t, err)
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(src, de.Name()))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dst, de.Name()), b, 0o644))
	}
	return dst
}

func readSeg(t *testing.T, w *WAL, s *segment) []byte {
	t.Helper()
	b := make([]byte, s.capacity)
	_, err := s.f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return b
}

// Steady state writes no zeros: after the first few rotations every
// spare is a recycled dead segment, and a recycled segment, with the old
// records of its previous life behind the new ones, replays to exactly
// what was written.
func TestRecycledSegmentReplays(t *testing.T) {
	r := newRecycling(t, nil)
	r.untilRecycledActive()
	filled := r.w.SparesFilled.Load()
	r.save(300)
	if got := r.w.SparesFilled.Load() - filled; got != 0 {
		t.Fatalf("%d spares zero-filled in steady state (%d recycled)", got, r.w.SparesRecycled.Load())
	}
	r.untilRecycledActive()
	a := r.w.active()
	data := readSeg(t, r.w, a)
	if allZero(data[a.size:]) {
		t.Fatalf("no stale bytes after the records of a recycled segment (size %d head %d cap %d num %d)", a.size, a.head, a.capacity, a.num)
	}
	// Behind the tail: the previous life's records, whole and valid.
	stale := 0
	for off := int(a.size); off+headerSize <= len(data); off++ {
		if h, _, problem := checkRecord(data[off:], headerSize); problem == "" && h.seg < a.num {
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("no valid stale record behind the tail")
	}
	r.check(r.w)
	must(t, r.w.Close())
	w, err := Open(r.dir, r.opts)
	must(t, err)
	r.check(w)
	must(t, w.Close())
	if names, _ := filepath.Glob(filepath.Join(r.dir, "spare.*")); len(names) != 0 {
		t.Fatalf("spares left after Close: %v", names)
	}
}

// A whole, valid stale record right at the tail (the previous life's
// record boundaries happened to line up) ends the log cleanly.
func TestStaleRecordAtTheTailEndsTheLog(t *testing.T) {
	r := newRecycling(t, nil)
	r.untilRecycledActive()
	a := r.w.active()
	data := readSeg(t, r.w, a)
	for _, seg := range []uint64{a.num - 1, 1} {
		b := append([]byte(nil), data...)
		rec := appendRecord(nil, recNode, []byte("whatever"))
		stampRecords(rec, seg, a.size) // even one claiming the tail was synced
		copy(b[a.size:], rec)
		w := &WAL{nodes: make(map[nodeKey]*node)}
		good, err := w.replay(b, a.num, 0, replayNewest)
		if err != nil || good != int(a.size) {
			t.Fatalf("stale record of segment %d at the tail: %d bytes good of %d, %v", seg, good, a.size, err)
		}
	}
}

// lastRecycledWrite makes a store whose newest segment is a recycled file
// and returns the segment's bytes before and after a last write (from..to),
// and its number.
func lastRecycledWrite(t *testing.T) (r *recycling, num uint64, pre, post []byte, from, to int) {
	r = newRecycling(t, nil)
	r.untilRecycledActive()
	// The records before the last write must all be synced (a compaction
	// mark is written unsynced), so that the last write vouches for them.
	for range 20 {
		if r.w.synced.Load() == r.w.written {
			break
		}
		r.save(1)
		r.untilRecycledActive()
	}
	a := r.w.active()
	pre = readSeg(t, r.w, a)
	from = int(a.size)
	i := r.last + 1
	must(t, r.w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Commit: i - 1}, EntriesToSave: bigEnts(i, i+2)}}, 1))
	if r.w.active() != a {
		t.Fatal("the last write rotated")
	}
	to = int(a.size)
	post = readSeg(t, r.w, a)
	if allZero(pre[from:to]) {
		t.Fatal("the last write did not land on stale bytes")
	}
	return r, a.num, pre, post, from, to
}

func replayNewestAs(data []byte, num uint64) (int, uint64, error) {
	w := &WAL{nodes: make(map[nodeKey]*node)}
	good, err := w.replay(data, num, 0, replayNewest)
	var last uint64
	if n := w.nodes[nodeKey{1, 1}]; n != nil {
		last = n.lastIndex()
	}
	return good, last, err
}

// A torn last write over stale bytes (cut at every byte, header or
// payload, or with any one of its sectors not written) is recognised as
// torn: it is dropped, everything before it survives, the store opens.
func TestTornWriteOverStaleBytes(t *testing.T) {
	r, num, pre, post, from, to := lastRecycledWrite(t)
	prevLast := r.last
	cases := map[string][]byte{}
	for cut := from; cut < to; cut++ {
		b := append(append([]byte(nil), post[:cut]...), pre[cut:]...)
		cases[fmt.Sprintf("cut at %d", cut)] = b
	}
	for s := from &^ (sectorSize - 1); s < to; s += sectorSize {
		b := append([]byte(nil), post...)
		lo, hi := max(s, from), min(s+sectorSize, to)
		copy(b[lo:hi], pre[lo:hi])
		if string(b[lo:hi]) != string(post[lo:hi]) {
			cases[fmt.Sprintf("sector at %d not written", s)] = b
		}
	}
	n := 0
	for name, b := range cases {
		if good, last, err := replayNewestAs(b, num); err != nil || good != from || last != prevLast {
			t.Fatalf("%s: %d bytes good (want %d), last entry %d (want %d), %v", name, good, from, last, prevLast, err)
		}
		if n++; n%endToEnd != 0 && !strings.HasPrefix(name, "sector") {
			continue
		}
		w, err := openCopy(t, segName(num), b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if es := read(t, w, 1, 1, prevLast, prevLast+5); len(es) != 1 || es[0].Index != prevLast {
			t.Fatalf("%s: after open, entries from %d: %d", name, prevLast, len(es))
		}
		w.Close()
	}
	if good, last, err := replayNewestAs(post, num); err != nil || good != to || last != prevLast+3 {
		t.Fatalf("whole write: %d bytes good, last %d, %v", good, last, err)
	}
}

// Damage to any acknowledged record of a recycled segment, one that a
// later record of the same segment vouches was synced, is an error, not
// the end of the log: stale bytes after the tail do not make it look torn.
func TestCorruptionBeforeStaleBytesIsAnError(t *testing.T) {
	_, num, _, post, from, _ := lastRecycledWrite(t)
	for at := 0; at < from; at++ {
		b := append([]byte(nil), post...)
		b[at] ^= 1 << (at % 8)
		if _, _, err := replayNewestAs(b, num); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit flipped at %d of %d: replay gave %v", at, from, err)
		}
		if at%endToEnd != 0 {
			continue
		}
		if w, err := openCopy(t, segName(num), b); !errors.Is(err, ErrCorrupt) {
			if err == nil {
				w.Close()
			}
			t.Fatalf("bit flipped at %d: Open gave %v", at, err)
		}
	}
}

// An older segment's records end exactly where the next segment's header
// says: damage anywhere before that is an error even if stale bytes or
// zeros follow, and a file shorter than that is an error.
func TestOlderSegmentEndsWhereTheNextSays(t *testing.T) {
	r := newRecycling(t, nil)
	r.untilRecycledActive()
	for i := r.last + 1; i <= r.last+40; i++ { // no compaction: segments stay
		must(t, r.w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: bigEnts(i, i)}}, 1))
	}
	must(t, r.w.Close())
	nums, err := listSegments(r.dir)
	must(t, err)
	if len(nums) < 2 {
		t.Fatalf("segments %v", nums)
	}
	end := (&WAL{dir: r.dir, fs: diskfs.Disk}).prevEnd(nums[1])
	if end == 0 {
		t.Fatal("the second segment does not say where the first ends")
	}
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"last record's last byte", func(b []byte) []byte { b[end-1] ^= 0x40; return b }},
		{"last record zeroed", func(b []byte) []byte { clear(b[end-100 : end]); return b }},
		{"cut short", func(b []byte) []byte { return b[:end-1] }},
	} {
		dir := copyDir(t, r.dir)
		path := filepath.Join(dir, segName(nums[0]))
		b, err := os.ReadFile(path)
		must(t, err)
		must(t, os.WriteFile(path, tc.damage(b), 0o644))
		if w, err := Open(dir, Options{NoSync: true}); !errors.Is(err, ErrCorrupt) {
			if err == nil {
				w.Close()
			}
			t.Fatalf("%s: Open gave %v", tc.name, err)
		}
	}
}

// A crash at any step of a rotation onto a recycled segment, or of the
// recycling itself, leaves files that open to every acknowledged entry:
// a spare (recycled or not, with a checkpoint at its head or not) is never
// read as a segment, and a segment renamed from a spare starts with its
// own synced header.
func TestCrashDuringRecyclingRotation(t *testing.T) {
	type snap struct {
		step string
		dir  string
		last uint64
	}
	var snaps []snap
	var r *recycling
	seen := map[string]int{}
	r = newRecycling(t, func(step string) {
		if r == nil || seen[step] >= 3 || r.w.SparesRecycled.Load() == 0 {
			return
		}
		seen[step]++
		snaps = append(snaps, snap{step, copyDir(t, r.dir), r.last})
	})
	r.save(400)
	for _, step := range []string{"segment recycled", "checkpoint written", "checkpoint synced", "spare renamed", "rotated"} {
		if seen[step] == 0 {
			t.Fatalf("step %q never reached", step)
		}
	}
	must(t, r.w.Close())
	for _, s := range snaps {
		w, err := Open(s.dir, Options{SegmentSize: 16 << 10, NoSync: true})
		if err != nil {
			t.Fatalf("crash after %q: %v", s.step, err)
		}
		// Every entry saved before the crash is there (the write in
		// progress, if any, was not acknowledged).
		low := compactedBelow(s.last) + 1
		got := read(t, w, 1, 1, low, s.last+2)
		if len(got) < int(s.last-low+1) {
			t.Fatalf("crash after %q: %d entries from %d, want up to %d", s.step, len(got), low, s.last)
		}
		sameEntries(t, got[:s.last-low+1], bigEnts(low, s.last))
		must(t, w.Close())
	}
}

// If a spare were written before its rename from a dead segment's name was
// durable (the order recycle forbids), the file named as segment M would
// start with segment N's header: Open refuses it instead of misreading.
func TestSegmentWithAnotherSegmentsHeaderIsAnError(t *testing.T) {
	r := newRecycling(t, nil)
	r.untilRecycledActive()
	must(t, r.w.Close())
	nums, _ := listSegments(r.dir)
	newest := nums[len(nums)-1]
	b, err := os.ReadFile(filepath.Join(r.dir, segName(newest)))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(r.dir, segName(newest+1)), b, 0o644))
	if w, err := Open(r.dir, Options{NoSync: true}); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			w.Close()
		}
		t.Fatalf("Open gave %v", err)
	}
}

// A crash while a growing segment's checkpoint is being written, with
// several chunks of copied entries in it, loses nothing: the checkpoint
// is not under a segment's name until it is synced whole (a checkpoint
// cut after a replica's first chunk would replay as that replica's whole
// log).
func TestCrashWhileWritingAGrowingCheckpoint(t *testing.T) {
	var snaps []string
	var w *WAL
	dir := t.TempDir()
	opts := Options{SegmentSize: 4 << 20, FS: noSpares{diskfs.Disk}, atStep: func(step string) {
		if step != "checkpoint written" || w == nil {
			return
		}
		snap := copyDir(t, dir)
		// The disk got the first part of the write only.
		for _, name := range []string{newSegName, segName(w.active().num + 1)} {
			path := filepath.Join(snap, name)
			if b, err := os.ReadFile(path); err == nil {
				must(t, os.WriteFile(path, b[:len(b)/2], 0o644))
			}
		}
		snaps = append(snaps, snap)
	}}
	w, err := Open(dir, opts)
	must(t, err)
	// 200 KiB of live entries: copied at rotation, in 64 KiB chunks.
	live := bigEnts(1, 280)
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: live}}, 1))
	for i := uint64(1); w.active().num < 3; i++ {
		must(t, w.SaveRaftState([]pb.Update{{ShardID: 2, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: bigEnts(i, i+99)}}, 1))
	}
	must(t, w.Close())
	if len(snaps) == 0 {
		t.Fatal("no rotation onto a growing segment")
	}
	for i, snap := range snaps {
		w, err := Open(snap, Options{SegmentSize: 4 << 20, NoSync: true})
		if err != nil {
			t.Fatalf("crash %d: %v", i, err)
		}
		sameEntries(t, read(t, w, 1, 1, 1, 300), live)
		must(t, w.Close())
	}
}

// Segments die in bursts (a replica pinning them compacts): up to
// maxSpares of them are kept as spares, the rest deleted, and the next
// rotations use the kept ones without filling zeros.
func TestBurstOfDeadSegmentsKeepsAFewSpares(t *testing.T) {
	r := newRecycling(t, nil)
	// Shard 2 holds 7 KB of entries and does not compact: too many to
	// copy at rotation, so it pins every segment from its first.
	must(t, r.w.SaveRaftState([]pb.Update{{ShardID: 2, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: bigEnts(1, 10)}}, 1))
	r.save(200)
	before, _ := listSegments(r.dir)
	if len(before) < maxSpares+3 {
		t.Fatalf("only %d segments pinned", len(before))
	}
	recycled := r.w.SparesRecycled.Load()
	must(t, r.w.RemoveEntriesTo(2, 1, 10))
	_, err := r.w.CompactEntriesTo(2, 1, 10)
	must(t, err)
	after, _ := listSegments(r.dir)
	spares, _ := filepath.Glob(filepath.Join(r.dir, "spare.*"))
	if len(after) > 2 || len(spares) > maxSpares || r.w.SparesRecycled.Load()-recycled < maxSpares-1 {
		t.Fatalf("after the burst: segments %v (before %v), spares %v, %d recycled",
			after, before, spares, r.w.SparesRecycled.Load()-recycled)
	}
	filled, first := r.w.SparesFilled.Load(), r.w.active().num
	for r.w.active().num < first+maxSpares-1 {
		r.save(1)
	}
	if n := r.w.SparesFilled.Load() - filled; n != 0 {
		t.Fatalf("%d zero fills with recycled spares in line", n)
	}
	r.check(r.w)
	must(t, r.w.Close())
	if spares, _ := filepath.Glob(filepath.Join(r.dir, "spare.*")); len(spares) != 0 {
		t.Fatalf("spares left after Close: %v", spares)
	}
	w, err := Open(r.dir, r.opts)
	must(t, err)
	r.check(w)
	must(t, w.Close())
}
