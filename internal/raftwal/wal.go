// Package raftwal is Warden's Raft log store: a dragonboat ILogDB that keeps
// every replica of a node in one append-only, segmented, CRC-checked log.
// Each SaveRaftState call is one write, and it is synced only when Raft
// needs it durable (new entries, a term or vote change, a snapshot); a
// commit-index-only change is written but not synced. Segments are written
// into blocks written before (a zero-filled spare, or a dead segment
// recycled, see recycle.go). docs/architecture.md ("Raft log store")
// specifies the format, the order of syncs and why it is safe; files go
// through a diskfs.FS, so tests can cut power at any operation.
//
// # Recovery
//
// Every record header carries the segment number and a synced offset
// (record.go), and each segment's header says where the previous
// segment's records end. Open reads each segment with these rules:
//
//   - A segment file starts with its own whole header (it is renamed into
//     place only after that header is synced), else ErrCorrupt.
//   - A segment that is not the newest ends exactly where the next one's
//     header says (it was synced before the next was made): every record
//     before that must be whole, else ErrCorrupt; what follows is not read.
//   - In the newest segment, zeros to the end of the file end the log
//     (zero-filled space).
//   - A stale record, whole but of an older segment number, ends the log:
//     a recycled file's previous life. A file only ever gets a higher
//     number, so stale bytes never pass for records of the segment.
//   - A damaged record (header cut short or failing its checksum, payload
//     past the end of the file or failing its checksum) is torn, the end
//     of the log, cut away with all after it, unless a later header of the
//     same segment, whole, says the log had been synced past the damaged
//     record when it was written: then the damaged record was durable and
//     acknowledged, and Open fails with ErrCorrupt. A torn write is never
//     vouched for so: only writes after the fdatasync that covers a record
//     carry a synced offset past it, and those come after the torn one in
//     time. A plain "any valid record after the damage is corruption" rule
//     would be wrong: one write holds several records (one per replica),
//     and writes not yet synced can reach the disk in any order, so whole
//     records of this segment can follow a torn one.
//   - The blind spot: damage to the last acknowledged records, with no
//     write after them, reads as a torn tail (etcd's WAL makes the same
//     call). A record written while the sync covering the damaged one was
//     running vouches for less than it could.
package raftwal

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/wardenlock/warden/internal/diskfs"
)

// Name is the LogDB type name dragonboat records in the data dir.
const Name = "warden-wal"

// DirName is the directory, under dragonboat's node host dir, that holds
// the segments.
const DirName = "wardenwal"

const (
	// DefaultSegmentSize is the size past which a new segment is started.
	DefaultSegmentSize = 64 << 20
	// copyLimit: at rotation, a replica in an older segment whose live
	// entries take at most this many bytes may have them copied into the
	// new segment, so an idle shard that never snapshots does not pin
	// old segments forever (see copySet).
	copyLimit = 256 << 10
	// copyChunk bounds the entries bytes of one copied record.
	copyChunk = 64 << 10
)

// ErrClosed is returned after Close.
var ErrClosed = errors.New("raftwal: store closed")

// Options tune a store; the zero value is the default.
type Options struct {
	SegmentSize int64
	// NoSync turns fdatasync off (tests of the format only).
	NoSync bool
	// FS is the file system the store works through (nil: the disk).
	FS diskfs.FS

	// Stats receives the segment syncs' count and durations (nil: the
	// store keeps its own, see WAL.Stats).
	Stats *Stats

	// fillInline makes spares at once, in the caller (tests: rotations
	// onto spares happen at known points).
	fillInline bool
	// atStep, if set, is called (w.mu held) between the steps of a
	// rotation and of a recycling, where a crash leaves the files as
	// they are (tests copy them).
	atStep func(step string)
}

// Factory creates the store for dragonboat (config.Expert.LogDBFactory).
type Factory struct{ Options Options }

var _ config.LogDBFactory = Factory{}

// Create opens the store under the node host dir.
func (f Factory) Create(_ config.NodeHostConfig, _ config.LogDBCallback,
	dirs []string, wals []string) (raftio.ILogDB, error) {
	dir := dirs[0]
	if len(wals) > 0 && wals[0] != "" {
		dir = wals[0]
	}
	return Open(filepath.Join(dir, DirName), f.Options)
}

// Name is the LogDB type name.
func (Factory) Name() string { return Name }

type segment struct {
	num      uint64
	f        diskfs.File
	recycled bool  // made from a dead segment: stale records follow size
	size     int64 // end of the records
	// head is the length of the checkpoint the segment starts with;
	// capacity the zero-filled length it was made with (0: it grows).
	head, capacity int64
}

// WAL is the store. One mutex (mu) orders writes and the in-memory index;
// fdatasync runs outside it so that concurrent SaveRaftState calls (one per
// step worker) share syncs; filesMu keeps a segment open while it is read
// or synced.
type WAL struct {
	dir  string
	opts Options
	fs   diskfs.FS

	mu      sync.Mutex
	closed  bool
	nodes   map[nodeKey]*node
	segs    []*segment // oldest first; the last is the active one
	written uint64     // position (see pos) of the end of the active segment
	buf     []byte
	spare   *spare   // the next segment (zero-filled or recycled, see prealloc.go)
	extra   []*spare // recycled spares in line behind it (recycle.go)

	// syncMu guards syncing, syncErr and the waits on syncDone; synced
	// is read without it.
	syncMu   sync.Mutex
	syncDone *sync.Cond
	syncing  uint64 // the highest position a running fdatasync covers
	syncErr  error  // sticky: after a failed fdatasync nothing new is durable
	synced   atomic.Uint64

	filesMu sync.RWMutex

	stats      *Stats
	spareReq   chan int64
	stop       chan struct{}
	fillerDone chan struct{}
	closeOnce  sync.Once

	// Syncs counts fdatasync calls on segments (tests, benchmarks);
	// SpareFailures counts spares that could not be made; SparesFilled
	// the zero-filled spares made, SparesRecycled the dead segments kept
	// as spares.
	Syncs          atomic.Uint64
	SpareFailures  atomic.Uint64
	SparesFilled   atomic.Uint64
	SparesRecycled atomic.Uint64
}

var _ raftio.ILogDB = (*WAL)(nil)

// pos orders every byte ever written: segment number, then offset.
func pos(seg uint64, off int64) uint64 { return seg<<40 | uint64(off) }

func segName(num uint64) string { return fmt.Sprintf("%020d.wal", num) }

// step marks a point where a test may look at the files.
func (w *WAL) step(name string) {
	if w.opts.atStep != nil {
		w.opts.atStep(name)
	}
}

// Stats returns the store's sync statistics.
func (w *WAL) Stats() *Stats { return w.stats }

// Name implements raftio.ILogDB.
func (w *WAL) Name() string { return Name }

// BinaryFormat implements raftio.ILogDB.
func (w *WAL) BinaryFormat() uint32 { return raftio.PlainLogDBBinVersion }

// Close syncs and closes every segment, and removes the spare.
func (w *WAL) Close() error {
	w.closeOnce.Do(func() {
		close(w.stop)
		<-w.fillerDone
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var err error
	if a := w.active(); a != nil && !w.opts.NoSync {
		err = w.syncSegment(a.f)
	}
	w.filesMu.Lock() // waits for running syncs and reads
	defer w.filesMu.Unlock()
	for _, s := range w.segs {
		if cerr := s.f.Close(); err == nil {
			err = cerr
		}
	}
	w.segs = nil
	for _, sp := range append(w.extra, w.spare) {
		if sp != nil {
			sp.f.Close()
			w.fs.Remove(sp.path)
		}
	}
	w.spare, w.extra = nil, nil
	return err
}

func (w *WAL) active() *segment {
	if len(w.segs) == 0 {
		return nil
	}
	return w.segs[len(w.segs)-1]
}

func (w *WAL) node(k nodeKey) *node {
	n := w.nodes[k]
	if n == nil {
		n = &node{}
		w.nodes[k] = n
	}
	return n
}

// ListNodeInfo lists the replicas that have bootstrap info.
func (w *WAL) ListNodeInfo() ([]raftio.NodeInfo, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]raftio.NodeInfo, 0, len(w.nodes))
	for k, n := range w.nodes {
		if n.hasBootstrap {
			out = append(out, raftio.NodeInfo{ShardID: k.shard, ReplicaID: k.replica})
		}
	}
	return out, nil
}

// SaveBootstrapInfo writes and syncs a replica's bootstrap info.
func (w *WAL) SaveBootstrapInfo(shardID, replicaID uint64, b pb.Bootstrap) error {
	r := nodeRec{shard: shardID, replica: replicaID, flags: fBootstrap, bootstrap: b}
	return w.writeNodes([]nodeRec{r}, [][]pb.Entry{nil}, true)
}

// GetBootstrapInfo returns raftio.ErrNoBootstrapInfo when there is none.
func (w *WAL) GetBootstrapInfo(shardID, replicaID uint64) (pb.Bootstrap, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.nodes[nodeKey{shardID, replicaID}]
	if n == nil || !n.hasBootstrap {
		return pb.Bootstrap{}, raftio.ErrNoBootstrapInfo
	}
	return n.bootstrap, nil
}

// SaveRaftState writes every update in one write and syncs only if one of
// them carries entries, a snapshot, or a new term or vote.
func (w *WAL) SaveRaftState(updates []pb.Update, _ uint64) error {
	recs := make([]nodeRec, 0, len(updates))
	ents := make([][]pb.Entry, 0, len(updates))
	for i := range updates {
		u := &updates[i]
		r := nodeRec{shard: u.ShardID, replica: u.ReplicaID}
		if !pb.IsEmptyState(u.State) {
			r.flags |= fState
			r.state = u.State
		}
		if !pb.IsEmptySnapshot(u.Snapshot) {
			r.flags |= fSnapshot | fSnapshotReset
			r.snapshot = u.Snapshot
		}
		if r.flags == 0 && len(u.EntriesToSave) == 0 {
			continue
		}
		recs = append(recs, r)
		ents = append(ents, u.EntriesToSave)
	}
	if len(recs) == 0 {
		return nil
	}
	return w.writeNodes(recs, ents, false)
}

// writeNodes appends the records in one write; it syncs if force is set or
// a record needs durability (judged against the state already stored).
func (w *WAL) writeNodes(recs []nodeRec, ents [][]pb.Entry, force bool) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	needSync := force
	buf := w.buf[:0]
	for i := range recs {
		r := &recs[i]
		n := w.nodes[nodeKey{r.shard, r.replica}]
		if r.flags == fState && len(ents[i]) == 0 && n != nil && n.hasState && pb.IsStateEqual(n.state, r.state) {
			continue // nothing new for this replica
		}
		switch {
		case len(ents[i]) > 0 || r.flags&(fSnapshot|fBootstrap) != 0:
			needSync = true
		case r.flags&fState != 0:
			// Term and vote must survive a crash; the commit index need not.
			if n == nil || !n.hasState || n.state.Term != r.state.Term || n.state.Vote != r.state.Vote {
				needSync = true
			}
		}
		var start int
		var err error
		buf, start = beginRecord(buf)
		if buf, _, err = appendNodePayload(buf, r, ents[i]); err != nil {
			w.mu.Unlock()
			return err
		}
		finishRecord(buf, start, recNode)
	}
	if len(buf) == 0 {
		w.mu.Unlock()
		return nil
	}
	end, err := w.appendLocked(buf)
	if cap(buf) <= 4<<20 {
		w.buf = buf[:0]
	}
	w.mu.Unlock()
	if err != nil {
		return err
	}
	if needSync {
		return w.syncTo(end)
	}
	return nil
}

// appendLocked writes buf (whole records) at the end of the active segment,
// starting a new one first if it would grow past the segment size, and
// applies the records to the index by decoding them, exactly as recovery
// does. It returns the position after them.
func (w *WAL) appendLocked(buf []byte) (uint64, error) {
	if err := w.maybeRotate(int64(len(buf))); err != nil {
		return 0, err
	}
	a := w.active()
	stampRecords(buf, a.num, w.syncedIn(a.num))
	if _, err := a.f.WriteAt(buf, a.size); err != nil {
		// The tail may hold part of buf; a later write would leave a hole
		// of garbage before it. Refuse further writes.
		w.closed = true
		return 0, fmt.Errorf("raftwal: write segment %d: %w", a.num, err)
	}
	if _, err := w.replay(buf, a.num, a.size, replayWrite); err != nil {
		return 0, err
	}
	a.size += int64(len(buf))
	w.written = pos(a.num, a.size)
	w.maybeAskSpare()
	return w.written, nil
}

// syncedIn is the offset in segment seg up to which the log is durable.
func (w *WAL) syncedIn(seg uint64) int64 {
	p := w.synced.Load()
	if p>>40 != seg {
		return 0
	}
	return int64(p & (1<<40 - 1))
}

// syncTo makes everything up to p durable. One fdatasync covers every
// write made before it started (group commit): a caller whose write a
// running sync covers waits for that sync; a caller whose write came
// after the running sync began starts its own at once, alongside it,
// instead of queueing behind a sync it does not need.
func (w *WAL) syncTo(p uint64) error {
	if w.synced.Load() >= p {
		return nil
	}
	w.syncMu.Lock()
	for w.syncErr == nil && w.synced.Load() < p && w.syncing >= p {
		w.syncDone.Wait()
	}
	if w.syncErr != nil || w.synced.Load() >= p {
		err := w.syncErr
		w.syncMu.Unlock()
		return err
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.syncMu.Unlock()
		return ErrClosed
	}
	a := w.active()
	end := w.written
	w.filesMu.RLock()
	w.mu.Unlock()
	w.syncing = max(w.syncing, end)
	w.syncMu.Unlock()
	var err error
	if !w.opts.NoSync {
		err = w.syncSegment(a.f)
	}
	w.filesMu.RUnlock()
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	defer w.syncDone.Broadcast()
	if err != nil {
		// What the failed sync covered may or may not be on disk, and a
		// later sync cannot tell (the kernel may have dropped the pages):
		// no write is acknowledged after this.
		w.syncErr = fmt.Errorf("raftwal: sync segment %d: %w", a.num, err)
		return w.syncErr
	}
	w.advanceSynced(end)
	return nil
}

// advanceSynced records that everything before p is durable.
func (w *WAL) advanceSynced(p uint64) {
	for {
		cur := w.synced.Load()
		if cur >= p || w.synced.CompareAndSwap(cur, p) {
			return
		}
	}
}

// IterateEntries returns the entries in [low, high), stopping once their
// size passes maxSize (at least one entry is returned).
func (w *WAL) IterateEntries(ents []pb.Entry, size uint64, shardID, replicaID uint64,
	low, high, maxSize uint64) ([]pb.Entry, uint64, error) {
	w.mu.Lock()
	n := w.nodes[nodeKey{shardID, replicaID}]
	if n == nil || len(n.spans) == 0 || low <= n.compactedTo || low < n.firstIndex() {
		w.mu.Unlock()
		return ents, size, nil
	}
	if last := n.lastIndex(); high > last+1 {
		high = last + 1
	}
	spans := append([]span(nil), n.spans...)
	files := w.filesLocked()
	w.filesMu.RLock()
	w.mu.Unlock()
	defer w.filesMu.RUnlock()
	return readSpans(files, nodeKey{shardID, replicaID}, spans, ents, size, low, high, maxSize)
}

// readSpans reads entries [low, high) from spans by pread.
func readSpans(files map[uint64]diskfs.File, k nodeKey, spans []span, ents []pb.Entry,
	size, low, high, maxSize uint64) ([]pb.Entry, uint64, error) {
	var blob []byte
	for _, s := range spans {
		if s.last < low || s.first >= high {
			continue
		}
		f := files[s.seg]
		if f == nil {
			return nil, 0, fmt.Errorf("raftwal: segment %d of shard %d replica %d is gone", s.seg, k.shard, k.replica)
		}
		if cap(blob) < s.n {
			blob = make([]byte, s.n)
		}
		blob = blob[:s.n]
		if _, err := f.ReadAt(blob, s.off); err != nil {
			return nil, 0, fmt.Errorf("raftwal: read segment %d: %w", s.seg, err)
		}
		var done bool
		var err error
		ents, size, done, err = decodeEntries(blob, s.base, max(low, s.first), min(high, s.last+1), ents, size, maxSize)
		if err != nil {
			return nil, 0, fmt.Errorf("raftwal: shard %d replica %d: %w", k.shard, k.replica, err)
		}
		if done {
			break
		}
	}
	return ents, size, nil
}

// ReadRaftState returns the stored state and the range of entries after
// snapshotIndex. The commit index returned is never below the snapshot:
// commit-only changes are not synced, so the stored commit may lag, and a
// snapshot only holds committed entries.
func (w *WAL) ReadRaftState(shardID, replicaID uint64, snapshotIndex uint64) (raftio.RaftState, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.nodes[nodeKey{shardID, replicaID}]
	if n == nil || !n.hasState {
		return raftio.RaftState{}, raftio.ErrNoSavedLog
	}
	st := raftio.RaftState{State: n.state, FirstIndex: snapshotIndex}
	floor := max(snapshotIndex, n.snapshot.Index)
	if st.State.Commit < floor {
		st.State.Commit = floor
	}
	last := n.lastIndex()
	if len(n.spans) > 0 && last > snapshotIndex {
		first := max(n.firstIndex(), snapshotIndex+1)
		if first > snapshotIndex+1 {
			return raftio.RaftState{}, fmt.Errorf(
				"raftwal: shard %d replica %d: entries start at %d, after the snapshot at %d",
				shardID, replicaID, first, snapshotIndex)
		}
		st.FirstIndex = first
		st.EntryCount = last - first + 1
	}
	if top := max(last, floor); st.State.Commit > top {
		return raftio.RaftState{}, fmt.Errorf(
			"raftwal: shard %d replica %d: commit %d is past the last stored entry %d",
			shardID, replicaID, st.State.Commit, top)
	}
	return st, nil
}

// RemoveEntriesTo forgets entries up to index. It is written but not
// synced: if it is lost, the entries come back below the snapshot, which
// is harmless; segments are only deleted once a synced checkpoint says so.
func (w *WAL) RemoveEntriesTo(shardID, replicaID uint64, index uint64) error {
	w.mu.Lock()
	n := w.nodes[nodeKey{shardID, replicaID}]
	w.mu.Unlock()
	if n == nil {
		return nil
	}
	if index == math.MaxUint64 {
		index = math.MaxUint64 - 1
	}
	r := nodeRec{shard: shardID, replica: replicaID, flags: fCompact, compactTo: index}
	return w.writeNodes([]nodeRec{r}, [][]pb.Entry{nil}, false)
}

// CompactEntriesTo deletes the segments nothing live is left in.
func (w *WAL) CompactEntriesTo(shardID, replicaID uint64, index uint64) (<-chan struct{}, error) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	var err error
	if !w.closed {
		err = w.deleteDeadSegments()
	}
	w.mu.Unlock()
	ch <- struct{}{}
	return ch, err
}

// SaveSnapshots records snapshots this node took itself; the log stays.
func (w *WAL) SaveSnapshots(updates []pb.Update) error {
	var recs []nodeRec
	var ents [][]pb.Entry
	for _, u := range updates {
		if pb.IsEmptySnapshot(u.Snapshot) {
			continue
		}
		recs = append(recs, nodeRec{shard: u.ShardID, replica: u.ReplicaID, flags: fSnapshot, snapshot: u.Snapshot})
		ents = append(ents, nil)
	}
	if len(recs) == 0 {
		return nil
	}
	return w.writeNodes(recs, ents, true)
}

// GetSnapshot returns the newest snapshot's metadata (empty if none).
func (w *WAL) GetSnapshot(shardID, replicaID uint64) (pb.Snapshot, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.nodes[nodeKey{shardID, replicaID}]; n != nil {
		return n.snapshot, nil
	}
	return pb.Snapshot{}, nil
}

// RemoveNodeData forgets everything about a replica.
func (w *WAL) RemoveNodeData(shardID, replicaID uint64) error {
	buf := appendRecord(nil, recRemove, removePayload(shardID, replicaID))
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	end, err := w.appendLocked(buf)
	w.mu.Unlock()
	if err != nil {
		return err
	}
	return w.syncTo(end)
}

// ImportSnapshot replaces a replica's data with a snapshot (repair tools):
// it joins, with the snapshot as its whole log. It is one record, so a
// power loss leaves the replica as it was or as imported, never without
// either.
func (w *WAL) ImportSnapshot(ss pb.Snapshot, replicaID uint64) error {
	if ss.Type == pb.UnknownStateMachine {
		return errors.New("raftwal: import snapshot: unknown state machine type")
	}
	r := nodeRec{
		shard: ss.ShardID, replica: replicaID,
		flags:     fReplace | fBootstrap | fState | fSnapshot | fSnapshotReset,
		bootstrap: pb.Bootstrap{Join: true, Type: ss.Type},
		state:     pb.State{Term: ss.Term, Commit: ss.Index},
		snapshot:  ss,
	}
	return w.writeNodes([]nodeRec{r}, [][]pb.Entry{nil}, true)
}
