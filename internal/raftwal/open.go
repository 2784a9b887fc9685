package raftwal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// ErrCorrupt is returned by Open when a segment other than the newest has
// a damaged record, or the newest has one that is not its torn tail.
var ErrCorrupt = errCorrupt

// Open opens (or creates) the store in dir: it replays every segment,
// truncates a torn tail of the newest, and starts a new segment that begins
// with a checkpoint of every replica's metadata.
func Open(dir string, opts Options) (*WAL, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	w := &WAL{dir: dir, opts: opts, nodes: make(map[nodeKey]*node)}
	nums, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	// Segments are deleted oldest first; a crash in the middle of that
	// can leave older ones behind a gap. Replay starts after the last gap.
	start := 0
	for i := 1; i < len(nums); i++ {
		if nums[i] != nums[i-1]+1 {
			start = i
		}
	}
	for _, num := range nums[:start] {
		if err := os.Remove(filepath.Join(dir, segName(num))); err != nil {
			return nil, err
		}
	}
	nums = nums[start:]
	ok := false
	defer func() {
		if !ok {
			for _, s := range w.segs {
				s.f.Close()
			}
		}
	}()
	for i, num := range nums {
		last := i == len(nums)-1
		if err := w.load(num, last); err != nil {
			return nil, err
		}
	}
	if err := syncDir(dir); err != nil {
		return nil, err
	}
	w.mu.Lock()
	err = w.rotate()
	if err == nil {
		err = w.deleteDeadSegments()
	}
	w.mu.Unlock()
	if err != nil {
		return nil, err
	}
	ok = true
	return w, nil
}

func listSegments(dir string) ([]uint64, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var nums []uint64
	for _, de := range des {
		name, found := strings.CutSuffix(de.Name(), ".wal")
		if !found {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("raftwal: unexpected file %s in %s", de.Name(), dir)
		}
		nums = append(nums, n)
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	return nums, nil
}

// load replays one segment. Only the newest may end in a torn write; it
// is cut back to its last whole record.
func (w *WAL) load(num uint64, last bool) error {
	path := filepath.Join(w.dir, segName(num))
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	good, err := w.replay(data, num, 0, last)
	if err != nil {
		return fmt.Errorf("raftwal: %s: %w", path, err)
	}
	if good == 0 {
		// Not even the segment header survived: a rotation that crashed.
		return os.Remove(path)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if good < len(data) {
		if err := f.Truncate(int64(good)); err != nil {
			f.Close()
			return err
		}
		if err := fdatasync(f); err != nil {
			f.Close()
			return err
		}
	}
	w.segs = append(w.segs, &segment{num: num, f: f, size: int64(good)})
	return nil
}

// replay applies the whole records in data, which sits at offset base of
// segment seg. With tornOK, a damaged record at the very end is a torn
// write: replay stops there and returns how many bytes were good. Any other
// damage is an error.
func (w *WAL) replay(data []byte, seg uint64, base int64, tornOK bool) (int, error) {
	off := 0
	for off < len(data) {
		rest := data[off:]
		at := base + int64(off)
		if len(rest) < headerSize {
			if tornOK {
				return off, nil
			}
			return off, fmt.Errorf("%w: short header at offset %d", errCorrupt, at)
		}
		h := parseHeader(rest)
		if !h.validHd {
			if tornOK && allZero(rest) {
				return off, nil
			}
			return off, fmt.Errorf("%w: bad header checksum at offset %d", errCorrupt, at)
		}
		end := headerSize + int(h.length)
		if int64(h.length) > int64(len(rest)-headerSize) {
			if tornOK {
				return off, nil
			}
			return off, fmt.Errorf("%w: record at offset %d runs past the end", errCorrupt, at)
		}
		payload := rest[headerSize:end]
		if crc32Castagnoli(payload) != h.sum {
			if tornOK && end == len(rest) {
				return off, nil
			}
			return off, fmt.Errorf("%w: bad payload checksum at offset %d", errCorrupt, at)
		}
		if err := w.applyRecord(h.typ, payload, seg, at); err != nil {
			return off, fmt.Errorf("%w (offset %d)", err, at)
		}
		off += end
	}
	return off, nil
}

func (w *WAL) applyRecord(typ byte, payload []byte, seg uint64, at int64) error {
	switch typ {
	case recSegment:
		num, err := parseSegmentPayload(payload)
		if err != nil {
			return err
		}
		if num != seg || at != 0 {
			return fmt.Errorf("%w: segment header for %d at offset %d of segment %d", errCorrupt, num, at, seg)
		}
	case recNode:
		if at == 0 {
			return fmt.Errorf("%w: segment %d has no header", errCorrupt, seg)
		}
		r, err := decodeNode(payload)
		if err != nil {
			return err
		}
		w.node(nodeKey{r.shard, r.replica}).apply(&r, seg, at+headerSize)
	case recRemove:
		s, r, err := decodeRemove(payload)
		if err != nil {
			return err
		}
		delete(w.nodes, nodeKey{s, r})
	default:
		return fmt.Errorf("%w: unknown record type %d", errCorrupt, typ)
	}
	return nil
}

func allZero(b []byte) bool { return len(bytes.Trim(b, "\x00")) == 0 }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (w *WAL) maybeRotate(n int64) error {
	a := w.active()
	if a == nil {
		return errors.New("raftwal: no active segment")
	}
	if a.size+n <= w.opts.SegmentSize || a.size < 4096 {
		return nil
	}
	if err := w.rotate(); err != nil {
		return err
	}
	return w.deleteDeadSegments()
}

// rotate syncs the active segment and starts the next one with a
// checkpoint: every replica's bootstrap info, state, snapshot and
// compaction mark, and the live entries of replicas with few of them.
// After it is synced, no older record is needed except live entries.
func (w *WAL) rotate() error {
	num := uint64(1)
	if a := w.active(); a != nil {
		if !w.opts.NoSync {
			if err := fdatasync(a.f); err != nil {
				return err
			}
			w.Syncs.Add(1)
		}
		num = a.num + 1
	}
	buf := appendRecord(nil, recSegment, segmentPayload(num))
	keys := make([]nodeKey, 0, len(w.nodes))
	for k := range w.nodes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].shard != keys[j].shard {
			return keys[i].shard < keys[j].shard
		}
		return keys[i].replica < keys[j].replica
	})
	for _, k := range keys {
		n := w.nodes[k]
		r := nodeRec{shard: k.shard, replica: k.replica}
		if n.hasBootstrap {
			r.flags |= fBootstrap
			r.bootstrap = n.bootstrap
		}
		if n.hasState {
			r.flags |= fState
			r.state = n.state
		}
		if !pb.IsEmptySnapshot(n.snapshot) {
			r.flags |= fSnapshot
			r.snapshot = n.snapshot
		}
		if n.compactedTo > 0 {
			r.flags |= fCompact
			r.compactTo = n.compactedTo
		}
		var ents []pb.Entry
		if w.copyAtRotation(n) {
			var err error
			if ents, err = w.readLocked(k, n, n.firstIndex(), n.lastIndex()+1); err != nil {
				return err
			}
			r.flags |= fEntriesAll
		}
		if r.flags == 0 && len(ents) == 0 {
			continue
		}
		// Copies go in chunks so that reading one entry back never
		// reads a large record.
		for first := true; first || len(ents) > 0; first = false {
			chunk := ents
			size := 0
			for i := range chunk {
				if size += chunk[i].Size(); size > copyChunk {
					chunk = chunk[:i+1]
					break
				}
			}
			ents = ents[len(chunk):]
			if !first {
				r = nodeRec{shard: k.shard, replica: k.replica}
			}
			var start int
			var err error
			buf, start = beginRecord(buf)
			if buf, _, err = appendNodePayload(buf, &r, chunk); err != nil {
				return err
			}
			finishRecord(buf, start, recNode)
		}
	}
	path := filepath.Join(w.dir, segName(num))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(buf, 0); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if !w.opts.NoSync {
		if err := fdatasync(f); err != nil {
			f.Close()
			return err
		}
		w.Syncs.Add(1)
	}
	if err := syncDir(w.dir); err != nil {
		f.Close()
		return err
	}
	w.filesMu.Lock()
	w.segs = append(w.segs, &segment{num: num, f: f})
	w.filesMu.Unlock()
	// The checkpoint restates what the index already holds, except that
	// copied entries now point into the new segment.
	if _, err := w.replay(buf, num, 0, false); err != nil {
		return err
	}
	a := w.active()
	a.size = int64(len(buf))
	w.written = pos(num, a.size)
	w.synced.Store(w.written)
	return nil
}

// copyAtRotation says whether a replica's live entries are copied into
// the new segment: when they are few (an idle shard that never snapshots
// must not pin old segments), or when they pin the oldest segment and
// take at most a quarter of a segment (a slow shard far from its next
// snapshot must not keep every segment written since).
func (w *WAL) copyAtRotation(n *node) bool {
	if len(n.spans) == 0 {
		return false
	}
	live := n.liveBytes()
	if live <= min(copyLimit, int(w.opts.SegmentSize/16)) {
		return true
	}
	return len(w.segs) > 1 && n.spans[0].seg == w.segs[0].num && int64(live) <= w.opts.SegmentSize/4
}

// readLocked reads a replica's entries [low, high) with w.mu held.
func (w *WAL) readLocked(k nodeKey, n *node, low, high uint64) ([]pb.Entry, error) {
	ents, _, err := readSpans(w.filesLocked(), k, n.spans, nil, 0, low, high, ^uint64(0))
	return ents, err
}

// filesLocked maps segment numbers to their open files (w.mu held).
func (w *WAL) filesLocked() map[uint64]*os.File {
	files := make(map[uint64]*os.File, len(w.segs))
	for _, s := range w.segs {
		files[s.num] = s.f
	}
	return files
}

// deleteDeadSegments removes the segments older than every live entry
// (metadata is in the active segment's checkpoint). Oldest first, so that
// a crash leaves a gap that Open recognises.
func (w *WAL) deleteDeadSegments() error {
	a := w.active()
	if a == nil {
		return nil
	}
	keep := a.num
	for _, n := range w.nodes {
		if len(n.spans) > 0 && n.spans[0].seg < keep {
			keep = n.spans[0].seg
		}
	}
	var dead []*segment
	for _, s := range w.segs {
		if s.num < keep {
			dead = append(dead, s)
		}
	}
	if len(dead) == 0 {
		return nil
	}
	// Compaction marks are not synced when written; make them durable
	// before the entries they release are gone.
	if !w.opts.NoSync {
		if err := fdatasync(a.f); err != nil {
			return err
		}
		w.Syncs.Add(1)
		w.synced.Store(w.written)
	}
	w.filesMu.Lock()
	w.segs = w.segs[len(dead):]
	w.filesMu.Unlock()
	for _, s := range dead {
		s.f.Close()
		if err := os.Remove(filepath.Join(w.dir, segName(s.num))); err != nil {
			return err
		}
	}
	return syncDir(w.dir)
}
