package raftwal

import "fmt"

// Recycling. A zero-filled spare costs every replica the CPU
// and disk bandwidth of writing a whole segment of zeros (0.4-0.7 s of CPU
// per 64 MiB on the project's machine, all replicas at the same entry),
// only so that appends overwrite written blocks. A dead segment's blocks
// are written too: so segments deleteDeadSegments would delete become
// spares instead, renamed to spare.recycled.<old number> (and the
// directory synced) before anything is written into them. A rotation then
// writes and syncs the new checkpoint over a spare's head and renames it
// into place, exactly as with a zero-filled spare. Its old records stay
// behind the new ones; record headers carry the segment number, so they
// read as stale (see endOfLog and the package doc). Zeros are filled only
// when no dead segment came in time (after Open, or while older segments
// still hold live entries when the active one is half full).
//
// At most maxSpares spares are kept; other dead segments are deleted. One
// would do if segments died one at a time, but they die in bursts: a
// replica's snapshot and compaction release every segment since the last
// one at once (under benchload, 11 segments at once after 230 s), and a
// rotation comes every 20-30 s in between. Disk use does not grow: the
// spares were live segments a moment before, and are at most 4 of them.

// maxSpares bounds the spares kept (the next one and recycled ones).
const maxSpares = 4

// recycledName prefixes a recycled spare's name (never replayed: not
// *.wal; Open deletes every spare.* file).
const recycledName = "spare.recycled"

// recycle renames the dead segment s (no longer in w.segs, nothing reads
// it) to a spare name and returns it as a spare, or returns nil if it is
// not worth keeping (then the caller deletes it); pending spares are
// already chosen but not yet added. The caller syncs the directory before
// a spare is used: written into before the rename is durable, a crash
// could leave the segment's name on the new contents.
func (w *WAL) recycle(s *segment, pending int) (*spare, error) {
	size, err := s.f.Size()
	if err != nil {
		return nil, nil // delete it instead
	}
	// Only files of about the segment size (preallocated ones, and growing
	// ones that were filled): a small one would keep segments small.
	if size < w.opts.SegmentSize*3/4 {
		return nil, nil
	}
	have := len(w.extra) + pending
	if w.spare != nil && w.spare.size >= size {
		have++ // a smaller spare is dropped for this one
	}
	if have >= maxSpares {
		return nil, nil
	}
	path := w.path(fmt.Sprintf("%s.%d", recycledName, s.num))
	if err := w.fs.Rename(w.path(segName(s.num)), path); err != nil {
		return nil, err
	}
	w.step("segment recycled")
	return &spare{f: s.f, size: size, path: path}, nil
}

// addSpare keeps sp: as the next spare if there is none or a smaller one
// (which is dropped), else in line behind it (w.mu held).
func (w *WAL) addSpare(sp *spare) {
	switch old := w.spare; {
	case old == nil:
		w.spare = sp
	case old.size < sp.size:
		old.f.Close()
		w.fs.Remove(old.path)
		w.spare = sp
	default:
		w.extra = append(w.extra, sp)
	}
}

// nextSpare makes the first spare in line the next one (w.mu held).
func (w *WAL) nextSpare() {
	if w.spare == nil && len(w.extra) > 0 {
		w.spare = w.extra[0]
		w.extra = w.extra[1:]
	}
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
	if w.spare != nil || a == nil {
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
