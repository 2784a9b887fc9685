package audit

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/wardenlock/warden/wire"
)

// Tables take tokens from the store's pacer as they are written; the log
// and the manifest do not. The rate is so low that the burst, once spent,
// cannot come back during the test.
func TestPacedFSPacesOnlyTables(t *testing.T) {
	dir := t.TempDir()
	fs := newPacedFS(vfs.Default, 1024)
	write := func(name string, n int) {
		t.Helper()
		f, err := fs.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write("000002.log", paceBurst)
	write("MANIFEST-000001", paceBurst)
	if got := fs.lim.Tokens(); got < paceBurst-1 {
		t.Fatalf("log and manifest took tokens: %.0f left of %d", got, paceBurst)
	}
	write("000005.sst", paceBurst*3/4)
	if got := fs.lim.Tokens(); got > paceBurst/2 {
		t.Fatalf("a table write of %d bytes left %.0f tokens of %d", paceBurst*3/4, got, paceBurst)
	}
}

// The file handed to pebble still exposes its descriptor, which pebble's
// syncing file needs for sync_file_range.
func TestPacedFileKeepsFd(t *testing.T) {
	fs := newPacedFS(vfs.Default, DefaultWriteRate)
	f, err := fs.Create(filepath.Join(t.TempDir(), "000007.sst"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(interface{ Fd() uintptr }); !ok {
		t.Fatalf("%T hides Fd", f)
	}
}

// After unpace (the store is closing), table writes no longer wait: at
// 1 KiB/s these three bursts would otherwise take about eight minutes.
func TestUnpacedTableWritesDoNotWait(t *testing.T) {
	fs := newPacedFS(vfs.Default, 1024)
	fs.unpace()
	f, err := fs.Create(filepath.Join(t.TempDir(), "000009.sst"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 3*paceBurst)); err != nil {
		t.Fatal(err)
	}
}

// TestStoreFilesArePrivate: the audit trail holds every key's values and
// client ids, so its directory is 0700 and its files 0600, also when the
// directory existed world-readable.
func TestStoreFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Dir: dir, SweepEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.Record(2, []wire.Event{{Shard: 2, Rev: 1, Kind: wire.EvKVPut, Path: "/k/v", Value: []byte("secret")}})
	s.Sync()
	if err := s.Durable(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("directory %s is %v, want 0700", dir, st.Mode().Perm())
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		t.Fatalf("%d files, %v", len(ents), err)
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if e.Type().IsRegular() && info.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", e.Name(), info.Mode().Perm())
		}
	}
}
