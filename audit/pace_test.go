package audit

import (
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
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
