package raftwal

import (
	"errors"
	"io/fs"
	"time"

	"github.com/wardenlock/warden/internal/diskfs"
)

// Preallocation. On ext4 (and most file systems) an fdatasync after a
// write that grows the file must commit the journal (the new size and
// block allocation); after a write into blocks that were already written
// and synced it flushes only the data. So segments are made ahead of
// time: a spare file is zero-filled and synced in the background, and a
// rotation writes its checkpoint over the spare's head and renames it into
// place. Appends then overwrite zeros and never change the file's size.
// Replay reads zeros after the last record as the end of the log.
//
// Spares grow geometrically from firstSpare to the segment size, so a
// store that writes little (tests, an idle node) never fills 64 MiB. A
// dead segment is recycled as the spare whenever one is there
// (recycle.go); the zero fill is what happens when none is.

const (
	spareName  = "spare.prealloc"
	firstSpare = 1 << 20
	fillChunk  = 1 << 20
	// fillSync: the filler syncs every so many bytes, so that a large
	// spare does not queue one long write-back in front of the log's syncs.
	fillSync = 4 << 20
	// fillRate bounds the background filler (bytes per second). Every
	// replica rotates at about the same moment, and three 64 MiB fills at
	// full speed (0.4-0.7 s on the project's machine) doubled the log's
	// sync p99 while they ran. At this rate a 64 MiB
	// spare takes 2 s, well inside the 3.5 s the busiest load measured
	// (about 18 MB/s per node) takes to fill a segment; a spare that is
	// late only means a growing segment until it is ready.
	fillRate = 32 << 20
)

// zeros is what spares are filled from (read only).
var zeros [fillChunk]byte

// spare is a file whose blocks are all written and synced (zero-filled,
// or a recycled dead segment), waiting to become the next segment.
type spare struct {
	f    diskfs.File
	size int64
	path string // spareName or recycledName
}

// fillSpare creates the spare file with size zero bytes, synced. It stops
// early (and returns nil, nil) when stop is closed or abandon (if not nil)
// says so. With paced, it writes at most fillRate bytes per second.
func (w *WAL) fillSpare(size int64, stop <-chan struct{}, paced bool, abandon func() bool) (*spare, error) {
	path := w.path(spareName)
	if err := w.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	f, err := w.fs.Create(path, 0o644)
	if err != nil {
		return nil, err
	}
	zero := zeros[:]
	start := time.Now()
	for off := int64(0); off < size; {
		due := start
		if paced {
			due = start.Add(time.Duration(off * int64(time.Second) / fillRate))
		}
		if !sleepUntil(due, stop) || (abandon != nil && abandon()) {
			f.Close()
			return nil, w.fs.Remove(path)
		}
		n := min(int64(len(zero)), size-off)
		if _, err = f.WriteAt(zero[:n], off); err != nil {
			break
		}
		off += n
		if !w.opts.NoSync && (off%fillSync == 0 || off == size) {
			if err = f.SyncData(); err != nil {
				break
			}
		}
	}
	if err != nil {
		f.Close()
		w.fs.Remove(path)
		return nil, err
	}
	w.SparesFilled.Add(1)
	return &spare{f: f, size: size, path: path}, nil
}

// sleepUntil waits until t (not at all if t has passed); false if stop is
// closed first.
func sleepUntil(t time.Time, stop <-chan struct{}) bool {
	select {
	case <-stop:
		return false
	default:
	}
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-stop:
		return false
	case <-tm.C:
		return true
	}
}

// filler makes the spares asked for on w.spareReq, one at a time, until
// Close. A spare that fails to fill is not made: the next rotation then
// starts a segment that grows as it is written (slower syncs, same data).
func (w *WAL) filler() {
	defer close(w.fillerDone)
	for {
		var size int64
		select {
		case <-w.stop:
			return
		case size = <-w.spareReq:
		}
		w.mu.Lock()
		ready := w.spare != nil
		w.mu.Unlock()
		if ready {
			continue
		}
		sp, err := w.fillSpare(size, w.stop, true, w.haveSpare)
		w.mu.Lock()
		switch {
		case err != nil:
			w.SpareFailures.Add(1)
		case sp == nil:
		case w.closed || w.spare != nil: // a dead segment was recycled meanwhile
			sp.f.Close()
			w.fs.Remove(sp.path)
		default:
			w.spare = sp
		}
		w.mu.Unlock()
	}
}

// haveSpare says whether a spare is ready (a fill under way stops then).
func (w *WAL) haveSpare() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.spare != nil
}

// askSpare asks the filler for the next spare (w.mu held).
func (w *WAL) askSpare(size int64) {
	if w.spareReq == nil {
		return
	}
	size = min(max(size, firstSpare), w.opts.SegmentSize)
	if w.opts.fillInline {
		if w.spare == nil {
			sp, err := w.fillSpare(size, nil, false, nil)
			if err != nil {
				w.SpareFailures.Add(1)
			}
			w.spare = sp
		}
		return
	}
	select {
	case w.spareReq <- size:
	default: // one is being made already
	}
}

// takeSpare turns the spare into segment num with buf (the checkpoint) at
// its head, synced before the rename, so that a file named as a segment
// always starts with its own header; nil if there is no spare big enough
// (w.mu held).
func (w *WAL) takeSpare(num uint64, buf []byte) (*segment, error) {
	sp := w.spare
	if sp == nil || int64(len(buf)) > sp.size/2 {
		return nil, nil
	}
	w.spare = nil
	w.nextSpare()
	fail := func(err error) (*segment, error) {
		sp.f.Close()
		w.fs.Remove(sp.path)
		return nil, err
	}
	if _, err := sp.f.WriteAt(buf, 0); err != nil {
		return fail(err)
	}
	w.step("checkpoint written")
	if !w.opts.NoSync {
		if err := w.syncSegment(sp.f); err != nil {
			return fail(err)
		}
	}
	w.step("checkpoint synced")
	if err := w.fs.Rename(sp.path, w.path(segName(num))); err != nil {
		return fail(err)
	}
	w.step("spare renamed")
	return &segment{num: num, f: sp.f, size: int64(len(buf)), head: int64(len(buf)), capacity: sp.size,
		recycled: sp.path != w.path(spareName)}, nil
}
