package raftwal

import (
	"os"
	"path/filepath"
)

// Recycling (session 8). A zero-filled spare costs every replica the CPU
// and disk bandwidth of writing a whole segment of zeros (0.4-0.7 s of CPU
// per 64 MiB on the project's machine, all replicas at the same entry),
// only so that appends overwrite written blocks. A dead segment's blocks
// are written too: so the newest segment deleteDeadSegments would delete
// becomes the next spare instead, renamed to spare.recycled (and the
// directory synced) before anything is written into it. A rotation then
// writes and syncs the new checkpoint over its head and renames it into
// place, exactly as with a zero-filled spare. Its old records stay behind
// the new ones; format 2 headers carry the segment number, so they read
// as stale (see endOfLog and the package doc). Zeros are filled only when
// no dead segment came in time (after Open, or while the oldest segment
// still holds live entries when the active one is half full).
//
// At most one spare is kept: a recycled segment replaces a smaller spare,
// a zero fill under way is abandoned once a spare exists, and other dead
// segments are deleted.

// recycledName is a recycled spare's name (never replayed: not *.wal).
const recycledName = "spare.recycled"

// recycle renames the dead segment s (no longer in w.segs, nothing reads
// it) to recycledName and returns it as a spare, or returns nil if it is
// not worth keeping (then the caller deletes it). The caller syncs the
// directory before the spare is used: written into before the rename is
// durable, a crash could leave the segment's name on the new contents.
func (w *WAL) recycle(s *segment) (*spare, error) {
	if w.opts.NoPrealloc {
		return nil, nil
	}
	fi, err := s.f.Stat()
	if err != nil {
		return nil, nil // delete it instead
	}
	// Only full-size files: a small one would keep segments small.
	size := fi.Size()
	if size < w.opts.SegmentSize || (w.spare != nil && w.spare.size >= size) {
		return nil, nil
	}
	path := filepath.Join(w.dir, recycledName)
	if err := os.Rename(filepath.Join(w.dir, segName(s.num)), path); err != nil {
		return nil, err
	}
	w.step("segment recycled")
	return &spare{f: s.f, size: size, path: path}, nil
}

// setSpare makes sp the spare, dropping a smaller one (w.mu held).
func (w *WAL) setSpare(sp *spare) {
	if old := w.spare; old != nil {
		old.f.Close()
		if old.path != sp.path {
			os.Remove(old.path)
		}
	}
	w.spare = sp
}

// maybeAskSpare asks the filler for a zero-filled spare when the next
// rotation will need one (w.mu held): at once for a growing segment and
// while spares still grow towards the segment size; otherwise only once
// the active segment is half full, so that a segment dying in the
// meantime is recycled instead. At the pace of the fill (fillRate) a
// 64 MiB spare takes 2 s; half a segment lasts 1.75 s at the busiest load
// measured, so a late spare means a short growing segment at worst.
func (w *WAL) maybeAskSpare() {
	a := w.active()
	if w.spare != nil || w.opts.NoPrealloc || a == nil {
		return
	}
	if a.capacity == 0 {
		w.askSpare(4 * a.head)
		return
	}
	if 2*a.capacity < w.opts.SegmentSize || 2*(a.size-a.head) >= a.capacity-a.head {
		w.askSpare(2 * a.capacity)
	}
}
