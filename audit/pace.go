package audit

import (
	"context"
	"strings"

	"github.com/cockroachdb/pebble/vfs"
	"golang.org/x/time/rate"
)

// Pacing. Every replica applies the same log, so every node's memtable
// fills at the same entry and all three flush at the same instant; a
// 32 MiB flush then takes about 0.2 s of CPU on each node, run flat out,
// and with three replicas and the clients on two cores that burst stalled
// every Raft round for a few hundred milliseconds (session 7, tail7:
// acquire p99 at half of peak 378 ms in the run that met a flush). The
// store's background writes (flushes and compactions, which build and
// write sstables) are therefore paced to DefaultWriteRate: the same work,
// spread over a second or two instead of one burst. The log that batches
// are committed to is not paced (commits stay as fast as before).

// DefaultWriteRate is the bytes per second the store's flushes and
// compactions may write. It is several times what the store takes in at
// the busiest load measured (about 3 MB/s of events per node at 60k lock
// ops/s, session 7), so flushes and compactions keep up with room to
// spare; if they fall behind, pebble stops writes and records are dropped
// and counted, never apply slowed.
const DefaultWriteRate = 32 << 20

// paceBurst is how many bytes a paced writer may write at once.
const paceBurst = 256 << 10

// pacedFS is a vfs.FS whose new sstables are written at a bounded rate.
type pacedFS struct {
	vfs.FS
	lim *rate.Limiter
}

func newPacedFS(fs vfs.FS, bytesPerSec int) *pacedFS {
	return &pacedFS{FS: fs, lim: rate.NewLimiter(rate.Limit(bytesPerSec), paceBurst)}
}

// Create paces the tables flushes and compactions write; other files (the
// log, the manifest) are not paced.
func (fs *pacedFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	// WithFd keeps the file descriptor visible to pebble's syncing file
	// (sync_file_range every BytesPerSync).
	return vfs.WithFd(f, &pacedFile{File: f, lim: fs.lim}), nil
}

type pacedFile struct {
	vfs.File
	lim *rate.Limiter
}

// Write writes p, then waits until the bytes written fit the rate.
func (f *pacedFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	for left := n; left > 0; left -= paceBurst {
		// Never fails: no deadline, and no request exceeds the burst.
		_ = f.lim.WaitN(context.Background(), min(left, paceBurst))
	}
	return n, err
}
