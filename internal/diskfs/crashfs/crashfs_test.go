package crashfs

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, f *FS, name string) []byte {
	t.Helper()
	b, err := f.ReadFile(name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}

// A file written, synced, written again: the first write survives every
// power loss, the second only when the mode keeps it; a file whose
// directory entry was never synced survives only a process kill.
func TestOnlySyncedStateSurvives(t *testing.T) {
	f := New()
	must(t, f.MkdirAllSynced("d"))
	a, err := f.Create("d/a", 0o644)
	must(t, err)
	_, err = a.WriteAt([]byte("synced"), 0)
	must(t, err)
	must(t, a.SyncData())
	must(t, f.SyncDir("d"))
	_, err = a.WriteAt([]byte("+later"), 6)
	must(t, err)
	b, err := f.Create("d/b", 0o644)
	must(t, err)
	_, err = b.WriteAt([]byte("data synced, name not"), 0)
	must(t, err)
	must(t, b.SyncData())
	st := f.Capture()

	img := st.Image(Synced, nil)
	if got := read(t, img, "d/a"); string(got) != "synced" {
		t.Fatalf("synced image: a holds %q", got)
	}
	if _, err := img.ReadFile("d/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("synced image: b is there (%v), its directory entry was never synced", err)
	}
	img = st.Image(Kept, nil)
	if got := read(t, img, "d/a"); string(got) != "synced+later" {
		t.Fatalf("kept image: a holds %q", got)
	}
	if got := read(t, img, "d/b"); string(got) != "data synced, name not" {
		t.Fatalf("kept image: b holds %q", got)
	}
	// An image is durable as a whole: a second power loss keeps it.
	if got := read(t, img.Capture().Image(Synced, nil), "d/a"); string(got) != "synced+later" {
		t.Fatalf("image of the kept image: a holds %q", got)
	}
}

// A torn image keeps any of an unsynced write's sectors, old or new each;
// a cut image keeps the unsynced writes in order up to one cut short.
func TestTornAndCutWrites(t *testing.T) {
	f := New()
	must(t, f.MkdirAllSynced("d"))
	h, err := f.Create("d/f", 0o644)
	must(t, err)
	old := bytes.Repeat([]byte{'o'}, 4*sector)
	_, err = h.WriteAt(old, 0)
	must(t, err)
	must(t, h.SyncData())
	must(t, f.SyncDir("d"))
	nw := bytes.Repeat([]byte{'n'}, 4*sector)
	_, err = h.WriteAt(nw, 0)
	must(t, err)
	st := f.Capture()
	mixed := false
	for seed := int64(0); seed < 64; seed++ {
		got := read(t, st.Image(Torn, rand.New(rand.NewSource(seed))), "d/f")
		if len(got) != 4*sector {
			t.Fatalf("torn image: %d bytes", len(got))
		}
		olds := 0
		for s := 0; s < 4; s++ {
			sec := got[s*sector : (s+1)*sector]
			switch {
			case bytes.Equal(sec, old[:sector]):
				olds++
			case !bytes.Equal(sec, nw[:sector]):
				t.Fatalf("torn image, seed %d: sector %d is neither old nor new", seed, s)
			}
		}
		mixed = mixed || olds > 0 && olds < 4
		got = read(t, st.Image(Cut, rand.New(rand.NewSource(seed))), "d/f")
		n := bytes.IndexByte(got, 'o')
		if n < 0 {
			n = len(got)
		}
		if !bytes.Equal(got[:n], nw[:n]) || !bytes.Equal(got[n:], old[n:]) {
			t.Fatalf("cut image, seed %d: not a prefix of the new write over the old", seed)
		}
	}
	if !mixed {
		t.Fatal("no torn image mixed old and new sectors")
	}
}

// A rename is one directory change: an image has the old name or the new
// one, never both or neither.
func TestRenameIsAtomic(t *testing.T) {
	f := New()
	must(t, f.MkdirAllSynced("d"))
	h, err := f.Create("d/tmp", 0o644)
	must(t, err)
	_, err = h.WriteAt([]byte("x"), 0)
	must(t, err)
	must(t, h.SyncData())
	must(t, f.SyncDir("d"))
	must(t, f.Rename("d/tmp", "d/final"))
	st := f.Capture()
	seen := map[string]bool{}
	for seed := int64(0); seed < 32; seed++ {
		names, err := st.Image(Torn, rand.New(rand.NewSource(seed))).List("d")
		must(t, err)
		if len(names) != 1 {
			t.Fatalf("seed %d: names %v", seed, names)
		}
		seen[names[0]] = true
	}
	if !seen["tmp"] || !seen["final"] {
		t.Fatalf("torn images only ever had %v", seen)
	}
}

// The hook sees every change, numbered, and cut gets the state as of it.
func TestHookCapturesAtTheOperation(t *testing.T) {
	f := New()
	var states []*State
	var ops []Op
	f.SetHook(func(op Op) bool { ops = append(ops, op); return op.Kind == "sync" }, func(_ Op, st *State) { states = append(states, st) })
	must(t, f.MkdirAll("d", 0o755))
	h, err := f.Create("d/f", 0o644)
	must(t, err)
	_, err = h.WriteAt([]byte("one"), 0)
	must(t, err)
	must(t, h.SyncData())
	_, err = h.WriteAt([]byte("two"), 0)
	must(t, err)
	if _, err := f.List("d"); err != nil || len(ops) != 5 || ops[3].N != 4 || ops[3].Kind != "sync" {
		t.Fatalf("ops %v (%v)", ops, err)
	}
	if len(states) != 1 || string(read(t, states[0].Image(Kept, nil), "d/f")) != "one" {
		t.Fatalf("%d states captured", len(states))
	}
}

// Freeze captures the state and holds every later change until Thaw.
func TestFreezeHoldsChanges(t *testing.T) {
	f := New()
	must(t, f.MkdirAllSynced("d"))
	h, err := f.Create("d/f", 0o644)
	must(t, err)
	st := f.Freeze()
	done := make(chan error)
	go func() { _, err := h.WriteAt([]byte("late"), 0); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("a write went through a frozen file system (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	f.Thaw()
	must(t, <-done)
	if got := read(t, st.Image(Kept, nil), "d/f"); len(got) != 0 {
		t.Fatalf("the frozen state holds %q", got)
	}
}

// pebble runs on the VFS view, and a database closed cleanly opens again
// from the image of what it synced (its directory made durable first:
// pebble does not sync the parent of the directory it creates).
func TestPebbleOnTheVFS(t *testing.T) {
	f := New()
	must(t, f.MkdirAllSynced("node/db"))
	db, err := pebble.Open("node/db", &pebble.Options{FS: f.VFS()})
	must(t, err)
	must(t, db.Set([]byte("k"), []byte("v"), pebble.Sync))
	must(t, db.Close())
	img := f.Capture().Image(Synced, nil)
	db, err = pebble.Open("node/db", &pebble.Options{FS: img.VFS()})
	must(t, err)
	defer db.Close()
	v, closer, err := db.Get([]byte("k"))
	must(t, err)
	defer closer.Close()
	if string(v) != "v" {
		t.Fatalf("got %q", v)
	}
}
