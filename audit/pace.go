package audit

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/vfs"
	"golang.org/x/time/rate"
)

// Pacing. Every replica applies the same log, so every node's memtable
// fills at the same entry and all three flush at the same instant; a
// 32 MiB flush then takes about 0.2 s of CPU on each node, run flat out,
// and with three replicas and the clients on two cores that burst delays
// every Raft round until it is over (the slowest acquires of an open-loop
// run cluster at these flushes). The
// store's background writes (flushes and compactions, which build and
// write sstables) are therefore paced to DefaultWriteRate: the same work,
// spread over a few seconds instead of one burst. The log that batches
// are committed to is not paced.

// DefaultWriteRate is the bytes per second the store's flushes and
// compactions may write. A flush costs about 8 ms of CPU per MB it writes,
// so this bounds that work at about 7 % of a core per
// node. Tables take about half the bytes the store takes in (events
// compress about 3x, and a compaction rewrites them about once: 104 MB of
// tables for 207 MB logged, 6.4M events in 16 shards), and at the
// busiest load measured a node takes in about 4 MB/s (60k lock ops/s,
// about 64 bytes per event), so flushes and compactions keep up several
// times over. If they ever fall behind, pebble stops writes, the queue
// fills and records are dropped and counted: apply is never slowed.
const DefaultWriteRate = 8 << 20

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
// log, the manifest) are not paced. Every file is readable by the node's
// user only (0600): the trail holds every key's values and client ids.
func (fs *pacedFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	if osf, ok := f.(*os.File); ok && err == nil {
		err = osf.Chmod(0o600)
	}
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	// WithFd keeps the file descriptor visible to pebble's syncing file
	// (sync_file_range every BytesPerSync).
	return vfs.WithFd(f, &pacedFile{File: f, lim: fs.lim}), nil
}

// MkdirAll makes the store's directories private (0700), also one that
// exists already: nobody but the node's user may list or open them.
func (fs *pacedFS) MkdirAll(dir string, _ os.FileMode) error {
	if err := fs.FS.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if fs.FS == vfs.Default {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// Lock takes the store's lock file, private like the rest.
func (fs *pacedFS) Lock(name string) (io.Closer, error) {
	c, err := fs.FS.Lock(name)
	if err == nil && fs.FS == vfs.Default {
		if err = os.Chmod(name, 0o600); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, err
}

// unpace lifts the bound: writes from now on are not paced (a waiting
// write still sleeps its share, at most paceBurst at the old rate).
func (fs *pacedFS) unpace() { fs.lim.SetLimit(rate.Inf) }

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
