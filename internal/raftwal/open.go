package raftwal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/wardenlock/warden/internal/diskfs"
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
	if opts.FS == nil {
		opts.FS = diskfs.Disk
	}
	w := &WAL{dir: dir, opts: opts, fs: opts.FS, nodes: make(map[nodeKey]*node),
		spareReq: make(chan int64, 1), stop: make(chan struct{}), fillerDone: make(chan struct{})}
	w.syncDone = sync.NewCond(&w.syncMu)
	if w.stats = opts.Stats; w.stats == nil {
		w.stats = &Stats{}
	}
	if err := w.makeDir(); err != nil {
		return nil, err
	}
	// A spare left by an earlier run may hold a checkpoint whose rename
	// did not happen, or a dead segment's records; it is never reused.
	if err := w.removeSpares(); err != nil {
		return nil, err
	}
	nums, err := w.listSegments()
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
		if err := w.fs.Remove(w.path(segName(num))); err != nil {
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
		var end int64
		if !last {
			end = w.prevEnd(nums[i+1])
		}
		if err := w.load(num, last, end); err != nil {
			return nil, err
		}
	}
	if err := w.syncDir(); err != nil {
		return nil, err
	}
	// The first segment is preallocated too; small, so Open stays quick.
	// If the spare cannot be made, the segment grows as it is written, as
	// after any spare that failed.
	if w.spare, err = w.fillSpare(min(firstSpare, opts.SegmentSize), nil, false, nil); err != nil {
		w.SpareFailures.Add(1)
	}
	w.mu.Lock()
	err = w.rotate(true)
	if err == nil {
		err = w.deleteDeadSegments()
	}
	w.maybeAskSpare()
	w.mu.Unlock()
	if err != nil {
		for _, sp := range append(w.extra, w.spare) {
			if sp != nil {
				sp.f.Close()
			}
		}
		return nil, err
	}
	go w.filler()
	ok = true
	return w, nil
}

// path names a file of the store.
func (w *WAL) path(name string) string { return filepath.Join(w.dir, name) }

// makeDir creates the store's directory if it is not there, and makes its
// entry in the parent durable: without that, a power loss could take the
// whole directory, acknowledged records and all.
func (w *WAL) makeDir() error {
	if err := w.fs.MkdirAll(w.dir, 0o755); err != nil {
		return err
	}
	if w.opts.NoSync {
		return nil
	}
	return w.fs.SyncDir(filepath.Dir(w.dir))
}

// removeSpares deletes the spares (spare.*) and a growing segment whose
// checkpoint was not synced (newSegName) an earlier run left.
func (w *WAL) removeSpares() error {
	names, err := w.fs.List(w.dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n, "spare.") || n == newSegName {
			if err := w.fs.Remove(w.path(n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// newSegName is a growing segment's name until its checkpoint is synced.
const newSegName = "segment.new"

func (w *WAL) listSegments() ([]uint64, error) {
	names, err := w.fs.List(w.dir)
	if err != nil {
		return nil, err
	}
	var nums []uint64
	for _, name := range names {
		base, found := strings.CutSuffix(name, ".wal")
		if !found {
			continue
		}
		n, err := strconv.ParseUint(base, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("raftwal: unexpected file %s in %s", name, w.dir)
		}
		nums = append(nums, n)
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	return nums, nil
}

// prevEnd reads, from segment num's header, where the records of segment
// num-1 end (0 if the header cannot be read: load then reports it).
func (w *WAL) prevEnd(num uint64) int64 {
	f, err := w.fs.Open(w.path(segName(num)))
	if err != nil {
		return 0
	}
	defer f.Close()
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	b = b[:n]
	h, end, problem := checkRecord(b, segHeaderSize)
	if problem != "" || h.typ != recSegment {
		return 0
	}
	sh, err := parseSegmentPayload(b[segHeaderSize:end])
	if err != nil || sh.num != num {
		return 0
	}
	return sh.prevEnd
}

// readAll reads a whole file.
func readAll(f diskfs.File) ([]byte, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	if n, err := f.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(data)) {
		return nil, err
	}
	return data, nil
}

// load replays one segment. end, when known (from the next segment's
// header), is exactly where its records end: they are all whole, and what
// follows is not read. Otherwise the records end as replay finds (see
// replayMode), and only the newest segment may end in a torn write; it is
// cut back to its last whole record.
func (w *WAL) load(num uint64, last bool, end int64) error {
	path := w.path(segName(num))
	f, err := w.fs.Open(path)
	if err != nil {
		return err
	}
	seg := &segment{num: num, f: f}
	if err := w.loadFile(seg, path, last, end); err != nil {
		f.Close()
		return err
	}
	w.segs = append(w.segs, seg)
	return nil
}

func (w *WAL) loadFile(seg *segment, path string, last bool, end int64) error {
	data, err := readAll(seg.f)
	if err != nil {
		return err
	}
	mode := replayOlder
	if last {
		mode = replayNewest
	}
	if end > 0 {
		if end > int64(len(data)) {
			return fmt.Errorf("raftwal: %s: %w: %d bytes, the next segment says its records end at %d",
				path, errCorrupt, len(data), end)
		}
		data, mode = data[:end], replayWrite
	}
	good, err := w.replay(data, seg.num, 0, mode)
	if err != nil {
		return fmt.Errorf("raftwal: %s: %w", path, err)
	}
	if last && good < len(data) {
		if err := seg.f.Truncate(int64(good)); err != nil {
			return err
		}
		if err := seg.f.SyncData(); err != nil {
			return err
		}
	}
	seg.size, seg.head = int64(good), int64(good)
	return nil
}

// replayMode says what may end a run of records.
type replayMode int

const (
	// replayWrite: whole records (just written, or a segment whose end
	// the next one records); any damage is an error.
	replayWrite replayMode = iota
	// replayOlder: a segment before the newest whose end the next one
	// does not record; zeros after its last record (zero-filled space)
	// end it, and so do stale bytes (see endOfLog).
	replayOlder
	// replayNewest: the newest segment; a torn write at its end also
	// ends it (see endOfLog).
	replayNewest
)

// replay applies the whole records in data, which sits at offset base of
// segment seg, and returns how many bytes were good. Any damage that mode
// does not allow is an error. A segment starts with its header record
// (framed with segHeaderSize-byte headers); every other record has a
// headerSize-byte header.
func (w *WAL) replay(data []byte, seg uint64, base int64, mode replayMode) (int, error) {
	off := 0
	for off < len(data) {
		rest := data[off:]
		at := base + int64(off)
		hs := headerSize
		if at == 0 {
			hs = segHeaderSize
		} else if mode != replayWrite && rest[0] == 0 && allZero(rest) {
			return off, nil
		}
		h, end, problem := checkRecord(rest, hs)
		if problem == "" && hs == headerSize && h.seg != seg {
			problem = fmt.Sprintf("record of segment %d", h.seg)
		}
		if problem != "" {
			if mode == replayWrite || at == 0 {
				return off, fmt.Errorf("%w: %s at offset %d", errCorrupt, problem, at)
			}
			return off, endOfLog(data, seg, base, off, problem)
		}
		if err := w.applyRecord(h.typ, rest[hs:end], seg, at, hs); err != nil {
			return off, fmt.Errorf("%w (offset %d)", err, at)
		}
		off += end
	}
	if base == 0 && off == 0 {
		return 0, fmt.Errorf("%w: segment %d has no header", errCorrupt, seg)
	}
	return off, nil
}

// checkRecord checks the record at the start of rest, framed with
// headers of hsize bytes. It returns the header, the record's length
// (header and payload) and, if it is damaged, what is wrong; the length
// is then as far as the damage is known to reach.
func checkRecord(rest []byte, hsize int) (header, int, string) {
	if len(rest) < hsize {
		return header{}, len(rest), "short header"
	}
	h := parseHeader(rest, hsize)
	if !h.validHd {
		return h, hsize, "bad header checksum"
	}
	if int64(h.length) > int64(len(rest)-hsize) {
		return h, len(rest), "record runs past the end"
	}
	end := hsize + int(h.length)
	if crc32Castagnoli(rest[hsize:end]) != h.sum {
		return h, end, "bad payload checksum"
	}
	return h, end, ""
}

// endOfLog decides, in a segment, whether the record at off that
// is not a whole record of this segment (damaged, or a stale record of an
// older segment left in a recycled file) is the end of the log (nil) or
// damage to acknowledged data (an error). It is the end unless a later
// whole header of this segment says the log was synced past off when that
// record was written: a write is acknowledged only after an fdatasync that
// covers it, every write after that carries a synced offset at least as
// far, and a record no later write vouches for was either never
// acknowledged (a torn write, or unsynced writes reaching the disk out of
// order) or is the last acknowledged data with nothing written after it.
// Stale bytes never pass for records of this segment: a file is only
// recycled into a higher segment number.
func endOfLog(data []byte, seg uint64, base int64, off int, problem string) error {
	at := base + int64(off)
	var key [8]byte
	binary.LittleEndian.PutUint64(key[:], seg)
	// The segment number sits at bytes 9..17 of a header: look for it.
	for from := off + 1 + 9; from < len(data); {
		i := bytes.Index(data[from:], key[:])
		if i < 0 {
			break
		}
		p := from + i - 9
		from += i + 1
		if len(data)-p < headerSize {
			break
		}
		h := parseHeader(data[p:], headerSize)
		if h.validHd && h.seg == seg && int64(h.synced) > at {
			return fmt.Errorf("%w: %s at offset %d, but the record at offset %d was written after the log was synced to %d",
				errCorrupt, problem, at, base+int64(p), h.synced)
		}
	}
	return nil
}

// applyRecord applies one whole record (at offset at, header hs bytes).
// A segment header is only valid at offset 0, and any other record only
// after it.
func (w *WAL) applyRecord(typ byte, payload []byte, seg uint64, at int64, hs int) error {
	if (typ == recSegment) != (at == 0) {
		return fmt.Errorf("%w: record of type %d at offset %d of segment %d", errCorrupt, typ, at, seg)
	}
	switch typ {
	case recSegment:
		sh, err := parseSegmentPayload(payload)
		if err != nil {
			return err
		}
		if sh.num != seg {
			return fmt.Errorf("%w: segment header for %d in segment %d", errCorrupt, sh.num, seg)
		}
	case recNode:
		r, err := decodeNode(payload)
		if err != nil {
			return err
		}
		w.node(nodeKey{r.shard, r.replica}).apply(&r, seg, at+int64(hs))
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

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (w *WAL) syncDir() error {
	if w.opts.NoSync {
		return nil
	}
	return w.fs.SyncDir(w.dir)
}

func (w *WAL) maybeRotate(n int64) error {
	a := w.active()
	if a == nil {
		return errors.New("raftwal: no active segment")
	}
	if !w.rotateBefore(a, n) {
		return nil
	}
	// Live entries are copied forward only when a full-size segment is
	// closed: the smaller segments a store starts with (1, 2, 4, ... MiB)
	// and a growing segment replaced by a spare are few, and copying a
	// slow replica's entries into each would make checkpoints as large
	// as the segments.
	if err := w.rotate(a.size+n > w.opts.SegmentSize); err != nil {
		return err
	}
	err := w.deleteDeadSegments()
	w.maybeAskSpare()
	return err
}

// rotateBefore says whether a write of n bytes goes to a new segment: a
// preallocated one when it would pass the zero-filled length; a growing
// one past the segment size, or as soon as a spare is ready for it (a
// growing segment is only made when no spare was). A segment holding
// nothing but its checkpoint takes any write.
func (w *WAL) rotateBefore(a *segment, n int64) bool {
	if a.size <= a.head {
		return false
	}
	if a.capacity > 0 {
		return a.size+n > a.capacity
	}
	return a.size+n > w.opts.SegmentSize || (w.spare != nil && w.spare.size > 2*a.head)
}

// rotate syncs the active segment and starts the next one with a
// checkpoint: every replica's bootstrap info, state, snapshot and
// compaction mark, and the live entries of the replicas copySet picks.
// After it is synced, no older record is needed except live entries.
// copyLive allows copying live entries (see copySet).
func (w *WAL) rotate(copyLive bool) error {
	num := uint64(1)
	var prevEnd int64
	var copiedBytes, copiedReplicas uint64
	if a := w.active(); a != nil {
		t0 := time.Now()
		defer func() { w.stats.observeRotation(time.Since(t0), copiedBytes, copiedReplicas) }()
		if !w.opts.NoSync {
			if err := w.syncSegment(a.f); err != nil {
				return err
			}
		}
		num, prevEnd = a.num+1, a.size
	}
	buf := appendSegmentRecord(nil, num, prevEnd)
	head := len(buf)
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
	var copies map[nodeKey]bool
	if copyLive {
		copies = w.copySet()
	}
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
		if copies[k] {
			var err error
			if ents, err = w.readLocked(k, n, n.firstIndex(), n.lastIndex()+1); err != nil {
				return err
			}
			r.flags |= fEntriesAll
			copiedBytes += uint64(n.liveBytes())
			copiedReplicas++
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
	stampRecords(buf[head:], num, 0)
	seg, err := w.takeSpare(num, buf)
	if err == nil && seg == nil {
		seg, err = w.growingSegment(num, buf)
	}
	if err != nil {
		return err
	}
	if !skipRotationDirSync {
		if err := w.syncDir(); err != nil {
			seg.f.Close()
			return err
		}
	}
	w.step("rotated")
	w.filesMu.Lock()
	w.segs = append(w.segs, seg)
	w.filesMu.Unlock()
	// The checkpoint restates what the index already holds, except that
	// copied entries now point into the new segment.
	if _, err := w.replay(buf, num, 0, replayWrite); err != nil {
		return err
	}
	w.written = pos(num, seg.size)
	w.advanceSynced(w.written)
	return nil
}

// growingSegment creates segment num holding buf (synced), to grow with
// each write: the fallback when no spare is ready (the filler lags or
// failed) or the checkpoint is too large for the spare.
func (w *WAL) growingSegment(num uint64, buf []byte) (*segment, error) {
	// Written under another name and renamed once synced, as a spare is:
	// a checkpoint cut short under the segment's name would replay in
	// part, and a replica's copied entries (fEntriesAll) with it.
	tmp := w.path(newSegName)
	if err := w.fs.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	f, err := w.fs.Create(tmp, 0o644)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*segment, error) {
		f.Close()
		w.fs.Remove(tmp)
		return nil, err
	}
	if _, err := f.WriteAt(buf, 0); err != nil {
		return fail(err)
	}
	w.step("checkpoint written")
	if !w.opts.NoSync {
		if err := w.syncSegment(f); err != nil {
			return fail(err)
		}
	}
	if err := w.fs.Rename(tmp, w.path(segName(num))); err != nil {
		return fail(err)
	}
	return &segment{num: num, f: f, size: int64(len(buf)), head: int64(len(buf))}, nil
}

// copySet chooses the replicas whose live entries a rotation copies into
// the new segment, so that old segments can be deleted: an idle shard that
// never snapshots, or a slow one far from its next snapshot, must not pin
// every segment written after its entries. A copy is only worth its cost
// when it frees segments, and the copy happens under the store's lock,
// where every writer of the node waits for it; so it takes, of the
// segments oldest first, the longest run whose pinning replicas' live
// entries together fit in copyBudget, and copies exactly those replicas.
// When several busy replicas pin the oldest segment together (a node with
// many similar shards), their entries do not fit and none is copied: their
// own snapshots and compactions will free it (copying each of 8 such
// replicas at once stopped every shard of the node for about 2 s).
func (w *WAL) copySet() map[nodeKey]bool {
	if len(w.segs) == 0 {
		return nil
	}
	// first[i]: the replicas whose oldest live entry is in w.segs[i].
	first := make([][]nodeKey, len(w.segs))
	live := make(map[nodeKey]int)
	at := make(map[uint64]int, len(w.segs))
	for i, s := range w.segs {
		at[s.num] = i
	}
	for k, n := range w.nodes {
		if len(n.spans) == 0 {
			continue
		}
		i, ok := at[n.spans[0].seg]
		if !ok {
			continue
		}
		first[i] = append(first[i], k)
		live[k] = n.liveBytes()
	}
	budget := w.copyBudget()
	var cost int64
	take := -1
	for i := range first {
		for _, k := range first[i] {
			cost += int64(live[k])
		}
		if cost > budget {
			break
		}
		take = i
	}
	set := make(map[nodeKey]bool)
	cost = 0
	for i := 0; i <= take; i++ {
		for _, k := range first[i] {
			set[k] = true
			cost += int64(live[k])
		}
	}
	// With what the budget leaves, replicas with few live entries move
	// forward out of the older segments even when that frees none yet:
	// idle shards, which never snapshot, would otherwise pin a segment
	// for good once too many of them share it. Never from the segment
	// being closed, where a copy moves nothing.
	for i := take + 1; i < len(first)-1; i++ {
		ks := first[i]
		sort.Slice(ks, func(a, b int) bool {
			if live[ks[a]] != live[ks[b]] {
				return live[ks[a]] < live[ks[b]]
			}
			return ks[a].shard < ks[b].shard || ks[a].shard == ks[b].shard && ks[a].replica < ks[b].replica
		})
		for _, k := range ks {
			if live[k] > w.smallLive() || cost+int64(live[k]) > budget {
				break
			}
			set[k] = true
			cost += int64(live[k])
		}
	}
	return set
}

// smallLive is the most live-entry bytes of a replica that a rotation
// moves forward on its own (see copySet).
func (w *WAL) smallLive() int { return min(copyLimit, int(w.opts.SegmentSize/16)) }

// copyBudget is the most live-entry bytes one rotation copies: a quarter
// of a segment.
func (w *WAL) copyBudget() int64 { return w.opts.SegmentSize / 4 }

// readLocked reads a replica's entries [low, high) with w.mu held.
func (w *WAL) readLocked(k nodeKey, n *node, low, high uint64) ([]pb.Entry, error) {
	ents, _, err := readSpans(w.filesLocked(), k, n.spans, nil, 0, low, high, ^uint64(0))
	return ents, err
}

// filesLocked maps segment numbers to their open files (w.mu held).
func (w *WAL) filesLocked() map[uint64]diskfs.File {
	files := make(map[uint64]diskfs.File, len(w.segs))
	for _, s := range w.segs {
		files[s.num] = s.f
	}
	return files
}

// deleteDeadSegments removes the segments older than every live entry
// (metadata is in the active segment's checkpoint), oldest first, so that
// a crash leaves a gap that Open recognises. The newest of them may be
// kept as the next spare instead (see recycle.go).
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
		if err := w.syncSegment(a.f); err != nil {
			return err
		}
		w.synced.Store(w.written)
	}
	// Readers hold filesMu while they read a segment: once it is taken,
	// nothing reads the dead ones.
	w.filesMu.Lock()
	w.segs = w.segs[len(dead):]
	w.filesMu.Unlock()
	// The newest dead segments are the ones kept as spares; all go oldest
	// first, renamed or deleted.
	var reuse []*spare
	drop := func(err error) error {
		for _, sp := range reuse {
			sp.f.Close()
		}
		return err
	}
	for i, s := range dead {
		if len(dead)-i <= maxSpares {
			sp, err := w.recycle(s, len(reuse))
			if err != nil {
				return drop(err)
			}
			if sp != nil {
				reuse = append(reuse, sp)
				continue
			}
		}
		s.f.Close()
		if err := w.fs.Remove(w.path(segName(s.num))); err != nil {
			return drop(err)
		}
	}
	if err := w.syncDir(); err != nil {
		return drop(err)
	}
	for _, sp := range reuse {
		w.addSpare(sp)
		w.SparesRecycled.Add(1)
	}
	return nil
}
