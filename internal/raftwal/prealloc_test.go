package raftwal

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	must(t, err)
	return fi.Size()
}

// Appends overwrite the zeros of a preallocated segment: the file's size
// never changes, so an fdatasync has no size to commit.
func TestAppendsDoNotGrowTheSegment(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Options{SegmentSize: 64 << 10, fillInline: true})
	must(t, err)
	defer w.Close()
	a := w.active()
	if a.capacity == 0 {
		t.Fatal("the first segment is not preallocated")
	}
	path := filepath.Join(dir, segName(a.num))
	before := fileSize(t, path)
	if before != a.capacity {
		t.Fatalf("segment file is %d bytes, capacity %d", before, a.capacity)
	}
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: bigEnts(1, 20)}}, 1))
	if w.active() != a {
		t.Fatal("rotated before the segment was full")
	}
	if after := fileSize(t, path); after != before {
		t.Fatalf("segment grew from %d to %d bytes", before, after)
	}
}

// Many rotations onto spares (one write larger than a spare among them),
// then a restart: every entry is there, and the restarted store keeps
// writing into preallocated segments.
func TestRestartAfterPreallocation(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 64 << 10, fillInline: true}
	w, err := Open(dir, opts)
	must(t, err)
	var want []pb.Entry
	save := func(w *WAL, es []pb.Entry) {
		t.Helper()
		must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: es}}, 1))
		want = append(want, es...)
	}
	first := w.active().num
	for i := uint64(1); i <= 300; i++ {
		save(w, bigEnts(i, i))
	}
	huge := bigEnts(301, 301)
	huge[0].Cmd = append(huge[0].Cmd, make([]byte, 100<<10)...)
	save(w, huge)
	save(w, bigEnts(302, 302))
	if w.active().num-first < 3 {
		t.Fatalf("only %d rotations for 300 KB in 64 KB segments", w.active().num-first)
	}
	if n := w.SpareFailures.Load(); n != 0 {
		t.Fatalf("%d spares failed", n)
	}
	sameEntries(t, read(t, w, 1, 1, 1, 400), want)
	must(t, w.Close())
	if _, err := os.Stat(filepath.Join(dir, spareName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("spare left after Close: %v", err)
	}
	for round := 0; round < 2; round++ {
		w, err = Open(dir, opts)
		must(t, err)
		sameEntries(t, read(t, w, 1, 1, 1, 400), want)
		if w.active().capacity == 0 {
			t.Fatal("restarted store writes into a growing segment")
		}
		next := uint64(len(want) + 1)
		save(w, bigEnts(next, next+9))
		must(t, w.Close())
	}
}

// A spare left by a crash, even one holding a checkpoint that was never
// renamed into place, is not read and not reused.
func TestStaleSpareIsIgnored(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Options{})
	must(t, err)
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: ents(1, 3, 1)}}, 1))
	seg, err := os.ReadFile(filepath.Join(dir, segName(w.active().num)))
	must(t, err)
	must(t, w.Close())
	stale := append(appendSegmentRecord(nil, 99, 0), seg[len(seg)/2:]...)
	must(t, os.WriteFile(filepath.Join(dir, spareName), stale, 0o644))
	w, err = Open(dir, Options{})
	must(t, err)
	sameEntries(t, read(t, w, 1, 1, 1, 100), ents(1, 3, 1))
	must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: ents(4, 4, 1)}}, 1))
	must(t, w.Close())
	w, err = Open(dir, Options{})
	must(t, err)
	defer w.Close()
	sameEntries(t, read(t, w, 1, 1, 1, 100), ents(1, 4, 1))
}

// Concurrent callers (dragonboat's step workers) each return only once a
// sync that began after their write has finished.
func TestConcurrentSaversAreSynced(t *testing.T) {
	w, err := Open(t.TempDir(), Options{})
	must(t, err)
	defer w.Close()
	atOpen := w.Syncs.Load()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for s := uint64(1); s <= 4; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(1); i <= 50; i++ {
				w.mu.Lock()
				before := w.written
				w.mu.Unlock()
				if err := w.SaveRaftState([]pb.Update{{ShardID: s, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: ents(i, i, 1)}}, 1); err != nil {
					errs <- err
					return
				}
				if got := w.synced.Load(); got <= before {
					errs <- errors.New("SaveRaftState returned before its write was synced")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if syncs := w.Syncs.Load() - atOpen; syncs > 200 {
		t.Fatalf("%d syncs for 200 writes", syncs)
	}
}

// Every fdatasync of a segment is counted in the Stats the store was
// given, with its duration, and matches Syncs.
func TestStatsCountSegmentSyncs(t *testing.T) {
	st := &Stats{}
	w, err := Open(t.TempDir(), Options{Stats: st})
	must(t, err)
	if w.Stats() != st {
		t.Fatal("the store keeps its own Stats, not the one it was given")
	}
	before, _, _ := st.Snapshot()
	for i := uint64(1); i <= 5; i++ {
		must(t, w.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: ents(i, i, 1)}}, 1))
	}
	count, seconds, cum := st.Snapshot()
	if count-before != 5 || count != w.Syncs.Load() {
		t.Fatalf("stats count %d (before %d), Syncs %d", count, before, w.Syncs.Load())
	}
	if seconds <= 0 || cum[len(cum)-1] > count {
		t.Fatalf("%v s, cumulative buckets %v for %d syncs", seconds, cum, count)
	}
	for i := 1; i < len(cum); i++ {
		if cum[i] < cum[i-1] {
			t.Fatalf("buckets not cumulative: %v", cum)
		}
	}
	must(t, w.Close())
}
