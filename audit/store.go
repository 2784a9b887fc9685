package audit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/wardenlock/warden/wire"
)

// Keys (all integers big-endian, so keys sort by them):
//
//	'b' shard firstRev → one applied entry's events (codec.go): the shard's
//	                     history, for watches and audit queries
//	'm' shard          → lowest revision still kept (after retention)
//	'v'                → the store's format (storeFormat)
//
// Every replica applies the same log, so every node records the same
// events (grouped into values as its writer happened to take them); a
// replica replaying its log after a restart gives its events again, and
// the store keeps only those above what it already has (stage.high).
// There is no per-path or time index: Find scans history newest first (an operator's query), and since
// a shard's stamped time never goes back as revisions grow, retention
// deletes a prefix of each shard's keys with one range deletion.
const storeFormat = 2

// Options configure a store.
type Options struct {
	Dir      string
	MaxAge   time.Duration // records older than this are dropped (default 7 days)
	MaxBytes int64         // on-disk size the store is trimmed to, oldest first (default 1 GiB)
	// Queue is how many applied entries may wait to be written (default
	// 4096); when that many wait, records are dropped and counted rather
	// than slowing apply.
	Queue int
	// Linger is the least time between two writes of the writer while
	// records keep coming (0: DefaultLinger; negative: none, the writer
	// writes at every wake-up). Sync, Durable and Close write at once.
	Linger time.Duration
	// SweepEvery is how often retention runs (default 1 minute).
	SweepEvery time.Duration
	// WriteRate is the bytes per second flushes and compactions may
	// write (default DefaultWriteRate; see pace.go).
	WriteRate int
	Log       *slog.Logger
	// FS is where the store keeps its files (default: the disk). Tests
	// pass a strict in-memory one to simulate a crash.
	FS vfs.FS
}

func (o *Options) fill() {
	if o.MaxAge <= 0 {
		o.MaxAge = 7 * 24 * time.Hour
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 1 << 30
	}
	if o.Queue <= 0 {
		o.Queue = 4096
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = time.Minute
	}
	if o.WriteRate <= 0 {
		o.WriteRate = DefaultWriteRate
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
}

// Store is one node's audit trail and watch history.
type Store struct {
	o    Options
	db   *pebble.DB
	pace *pacedFS

	// Records wait in their shard's stage until the writer takes them;
	// Record wakes the writer through wake (one token: a pass of the
	// apply loop, or several shards' passes, costs one wake-up).
	stages        atomic.Pointer[map[uint64]*stage] // copied on a new shard
	stagesMu      sync.Mutex                        // adding a stage
	waiting       atomic.Int64                      // entries staged, not yet taken
	wake          chan struct{}
	flush         chan chan struct{}
	batch         *pebble.Batch // the writer's, reused
	pendingEvents uint64        // events in batch
	pendingStages []stageAt     // stages in batch

	durableMu    sync.Mutex    // Durable, and Close's last flush
	durableAt    uint64        // Written() at the last Durable
	committedSeq atomic.Uint64 // the writer's last batch's last sequence number
	closed       bool
	// flushedSeq is the highest sequence number in a table a finished
	// flush wrote (FlushEnd): every batch up to it is in synced tables.
	flushedSeq *atomic.Uint64
	// durableFlushes and durableSkips count Durable's forced flushes and
	// the calls a finished flush had already covered.
	durableFlushes, durableSkips atomic.Uint64

	mu     sync.Mutex
	oldest map[uint64]uint64 // shard → lowest rev kept (0 = from the start)
	newest map[uint64]uint64 // shard → highest rev written

	dropped atomic.Uint64
	written atomic.Uint64
	// values and valueEntries count the values (keys) the writer wrote
	// and the applied entries they held (their ratio is the merging).
	values, valueEntries atomic.Uint64

	stopc     chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// stage holds one shard's records from Record until the writer takes
// them: the entries applied since, encoded on the apply path into runs
// (no allocation once warm). At 16 shards an entry carries about 5
// operations, against about 70 at one shard, and what the store paid per
// entry (a queued object, a pebble key, often a writer wake-up) would make
// its CPU per operation 3.4 times as high.
type stage struct {
	shard uint64
	mu    sync.Mutex
	runs  []*run // waiting, in revision order
	free  []*run // written, kept for reuse
	spare []*run // the slice the writer last took, to swap in
	// high is the highest revision staged or already in the store: a
	// replica replaying its log after a restart gives events the store
	// may already have, and only those above high are kept.
	high uint64
	// written is the highest revision the writer has committed (or
	// given up on) from this stage.
	written uint64
}

// stageAt is a stage and the last revision of it the writer's batch holds.
type stageAt struct {
	st  *stage
	rev uint64
}

// maxRun is how large a run grows before the next entry starts another
// (a value read whole by History and Find).
const maxRun = 32 << 10

// maxPooled bounds the run buffers kept for reuse (runs with large KV
// values are rare; their buffers are left to the GC).
const maxPooled = 64 << 10

type quietLogger struct{ log *slog.Logger }

func (l quietLogger) Infof(string, ...any)              {}
func (l quietLogger) Fatalf(format string, args ...any) { l.log.Error(fmt.Sprintf(format, args...)) }

// Open opens (or creates) the store in o.Dir and starts its writer. A store
// of another format is refused (ErrFormat).
func Open(o Options) (*Store, error) {
	o.fill()
	cache := pebble.NewCache(8 << 20)
	defer cache.Unref()
	pace := newPacedFS(o.FS, o.WriteRate)
	flushedSeq := new(atomic.Uint64) // the store's, once it exists
	po := &pebble.Options{
		FS:    pace,
		Cache: cache,
		// No log of its own (see Durable): what is still in the memtable
		// when the process dies is recorded again by the Raft log's
		// replay. Writing that log (a write call per commit) would cost
		// 13–24 % of the store's CPU.
		DisableWAL: true,
		// Large memtables (they start at 256 KiB and grow only under
		// load) and a deeper L0 mean fewer flushes and compactions: the
		// data is written once and read rarely.
		MemTableSize:          32 << 20,
		L0CompactionThreshold: 8,
		L0StopWritesThreshold: 32,
		LBaseMaxBytes:         256 << 20,
		Logger:                quietLogger{o.Log},
		EventListener: pebble.EventListener{FlushEnd: func(info pebble.FlushInfo) {
			if info.Err != nil {
				return
			}
			for _, t := range info.Output {
				for seq := flushedSeq.Load(); t.LargestSeqNum > seq && !flushedSeq.CompareAndSwap(seq, t.LargestSeqNum); {
					seq = flushedSeq.Load()
				}
			}
		}},
	}
	// 32 KiB blocks rather than 4 KiB: a table is written about one
	// block per write call, and on this kind of machine a call costs more
	// than its bytes; every block also has its own index entry, checksum
	// and cache bookkeeping: flush CPU per operation −35 %, write calls
	// halved, tables 15 % smaller than with 4 KiB. Reads are scans and
	// seeks an operator makes: a larger block costs them nothing that
	// shows.
	po.Levels = make([]pebble.LevelOptions, 7)
	for i := range po.Levels {
		po.Levels[i].BlockSize = 32 << 10
	}
	if err := makeDir(o.FS, o.Dir); err != nil {
		return nil, fmt.Errorf("audit: open %s: %w", o.Dir, err)
	}
	db, err := pebble.Open(o.Dir, po)
	if err != nil {
		return nil, fmt.Errorf("audit: open %s: %w", o.Dir, err)
	}
	s := &Store{o: o, db: db, pace: pace, wake: make(chan struct{}, 1), flush: make(chan chan struct{}),
		oldest: map[uint64]uint64{}, newest: map[uint64]uint64{}, stopc: make(chan struct{}), flushedSeq: flushedSeq}
	s.stages.Store(&map[uint64]*stage{})
	if err := s.checkFormat(); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.loadMarks(); err != nil {
		db.Close()
		return nil, err
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.writer() }()
	go func() { defer s.wg.Done(); s.sweeper() }()
	return s, nil
}

// makeDir creates the store's directory if it is not there and makes its
// entry in the parent durable: pebble syncs what is inside the directory,
// not the directory itself, and a power loss could take it whole, records
// made durable and all.
func makeDir(fs vfs.FS, dir string) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	parent, err := fs.OpenDir(fs.PathDir(dir))
	if err != nil {
		return err
	}
	err = parent.Sync()
	if cerr := parent.Close(); err == nil {
		err = cerr
	}
	return err
}

// ErrFormat: the store's directory holds a store of another format.
var ErrFormat = errors.New("audit: the store has another format")

// checkFormat stamps a new store with storeFormat and refuses one of
// another format.
func (s *Store) checkFormat() error {
	v, closer, err := s.db.Get([]byte{'v'})
	if err == nil {
		ok := len(v) == 1 && v[0] == storeFormat
		closer.Close()
		if !ok {
			return fmt.Errorf("%w: %x in %s, this build reads %d", ErrFormat, v, s.o.Dir, storeFormat)
		}
		return nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("audit: %w", err)
	}
	if err := s.db.Set([]byte{'v'}, []byte{storeFormat}, pebble.NoSync); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if err := s.db.Flush(); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// Close writes what is queued and closes the store. Later calls do
// nothing; Record after Close drops (and counts) what it is given.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		// pebble's Close waits for a running flush or compaction, and a
		// Durable's flush may hold durableMu: let them finish at full
		// speed rather than hold a shutdown for seconds.
		s.pace.unpace()
		close(s.stopc)
		s.wg.Wait()
		if s.batch != nil {
			s.batch.Close() // the writer's, empty: it wrote what waited
		}
		s.durableMu.Lock()
		defer s.durableMu.Unlock()
		s.closed = true
		// No log: the memtable must reach a table, or a clean stop would
		// lose what a replay might no longer bring back.
		s.closeErr = s.db.Flush()
		if err := s.db.Close(); s.closeErr == nil {
			s.closeErr = err
		}
	})
	return s.closeErr
}

// Record stages an applied entry's events (of one shard, in revision
// order), encoded: events is not kept. It never blocks: when Queue entries
// wait to be written the events are dropped and counted (Dropped). Events
// at or below the highest revision the store already has for the shard
// are skipped: they are a replay of entries recorded before.
func (s *Store) Record(shard uint64, events []wire.Event) {
	st := s.stageOf(shard)
	st.mu.Lock()
	for len(events) > 0 && events[0].Rev <= st.high {
		events = events[1:]
	}
	if len(events) == 0 {
		st.mu.Unlock()
		return
	}
	if s.waiting.Load() >= int64(s.o.Queue) {
		st.mu.Unlock()
		if s.dropped.Add(uint64(len(events))) == uint64(len(events)) {
			s.o.Log.Warn("audit queue full: records dropped (the disk is slower than apply)", "shard", shard)
		}
		return
	}
	var r *run
	if n := len(st.runs); n > 0 && st.runs[n-1].last+1 == events[0].Rev && len(st.runs[n-1].body) < maxRun {
		r = st.runs[n-1]
	} else {
		r = st.newRun()
		st.runs = append(st.runs, r)
	}
	r.add(events)
	st.high = r.last
	st.mu.Unlock()
	s.waiting.Add(1)
	select {
	case s.wake <- struct{}{}:
	default: // the writer is already woken: it takes this entry too
	}
}

// stageOf returns the shard's stage, made on its first record.
func (s *Store) stageOf(shard uint64) *stage {
	if st := (*s.stages.Load())[shard]; st != nil {
		return st
	}
	s.stagesMu.Lock()
	defer s.stagesMu.Unlock()
	old := *s.stages.Load()
	if st := old[shard]; st != nil {
		return st
	}
	s.mu.Lock()
	st := &stage{shard: shard, high: s.newest[shard], written: s.newest[shard]}
	s.mu.Unlock()
	next := make(map[uint64]*stage, len(old)+1)
	for id, x := range old {
		next[id] = x
	}
	next[shard] = st
	s.stages.Store(&next)
	return st
}

func (st *stage) newRun() *run {
	if n := len(st.free); n > 0 {
		r := st.free[n-1]
		st.free = st.free[:n-1]
		return r
	}
	return &run{}
}

// Dropped is how many events were not recorded because the queue was full.
func (s *Store) Dropped() uint64 { return s.dropped.Load() }

// Written is how many events were written.
func (s *Store) Written() uint64 { return s.written.Load() }

// Values is how many values (keys) the writer wrote and how many applied
// entries they held.
func (s *Store) Values() (values, entries uint64) { return s.values.Load(), s.valueEntries.Load() }

// DurableFlushes is how many flushes Durable forced, and how many of its
// calls a flush that had already ended covered (no flush forced).
func (s *Store) DurableFlushes() (forced, covered uint64) {
	return s.durableFlushes.Load(), s.durableSkips.Load()
}

// Sync waits until everything queued before the call is written.
func (s *Store) Sync() {
	done := make(chan struct{})
	select {
	case s.flush <- done:
		<-done
	case <-s.stopc:
	}
}

// Durable makes every record queued before the call durable (in a synced
// table): a shard calls it before a snapshot, which ends the replay of the
// entries it covers. Without a log of its own the store keeps recent
// records only in memory; they survive a crash because a restarting
// replica applies (and records) again every entry after its latest
// snapshot, so the records of the entries a snapshot covers must be on
// disk before that snapshot exists. The flush is paced like the store's
// own: the shard saves its snapshot beside its applies (shard/durable.go),
// so a flush at full speed would only put a burst of writes and CPU on
// every node at the same entry. No flush is forced when a flush that ended
// since has already written every record to synced tables.
func (s *Store) Durable() error {
	s.Sync()
	s.durableMu.Lock()
	defer s.durableMu.Unlock()
	written := s.written.Load()
	if s.closed || written == s.durableAt {
		return nil // nothing new since the last call
	}
	// Memtables hold consecutive ranges of sequence numbers and are
	// flushed oldest first, so a flushed table holding sequence number q
	// means every batch up to q is in synced tables (and in the synced
	// manifest: pebble calls FlushEnd after installing the flush).
	if s.committedSeq.Load() <= s.flushedSeq.Load() {
		s.durableSkips.Add(1)
		s.durableAt = written
		return nil
	}
	if err := s.db.Flush(); err != nil {
		return fmt.Errorf("audit: flush: %w", err)
	}
	s.durableFlushes.Add(1)
	s.durableAt = written
	return nil
}

// DefaultLinger spaces the writer's writes. Each write puts one key per
// shard's run into the memtable (a skiplist insert at one of as many
// places as there are shards, the largest per-key cost in the store) and
// wakes the writer once. At 16 shards a shard applies an entry every 2 ms
// or so, so without a pause nearly every entry became its own key; 10 ms
// gathers about 5 per key there, and at one shard a dozen or more. Records
// are read back only for revisions the feed's ring no longer holds, and
// History writes what waits before it reads.
const DefaultLinger = 10 * time.Millisecond

func (s *Store) writer() {
	pause := time.NewTimer(time.Hour)
	pause.Stop()
	for {
		select {
		case <-s.wake:
			s.writeStaged()
			if s.o.Linger < 0 {
				continue
			}
			// Let the next records gather: at most one write per
			// Linger while they keep coming.
			pause.Reset(s.o.Linger)
			if !s.linger(pause.C) {
				return
			}
		case done := <-s.flush:
			s.writeStaged()
			close(done)
		case <-s.stopc:
			s.writeStaged()
			return
		}
	}
}

// linger waits for the pause to end, serving Sync at once; false: the
// store is closing (and what waited is written).
func (s *Store) linger(end <-chan time.Time) bool {
	for {
		select {
		case <-end:
			return true
		case done := <-s.flush:
			s.writeStaged()
			close(done)
		case <-s.stopc:
			s.writeStaged()
			return false
		}
	}
}

// writeStaged writes every stage's waiting runs in one batch, a key per
// run.
func (s *Store) writeStaged() {
	for _, st := range *s.stages.Load() {
		st.mu.Lock()
		runs := st.runs
		st.runs, st.spare = st.spare[:0], nil
		st.mu.Unlock()
		if len(runs) == 0 {
			st.spare = runs
			continue
		}
		s.write(st, runs)
		st.mu.Lock()
		for _, r := range runs {
			if cap(r.body) <= maxPooled {
				r.reset()
				st.free = append(st.free, r)
			}
		}
		st.spare = runs[:0]
		st.mu.Unlock()
	}
	if s.batch != nil && !s.batch.Empty() {
		s.commit()
	}
}

// write adds a shard's runs to the writer's batch, and commits the batch
// once it is large.
func (s *Store) write(st *stage, runs []*run) {
	shard := st.shard
	if s.batch == nil {
		s.batch = s.db.NewBatch()
	}
	b := s.batch
	var key [17]byte
	var hdr [maxHeader]byte
	entries := 0
	s.mu.Lock()
	for _, r := range runs {
		h := r.appendHeader(hdr[:0])
		op := b.SetDeferred(len(key), len(h)+len(r.body))
		copy(op.Key, appendBatchKey(key[:0], shard, r.first))
		copy(op.Value[copy(op.Value, h):], r.body)
		op.Finish()
		s.newest[shard] = max(s.newest[shard], r.last)
		s.pendingEvents += uint64(r.n)
		entries += r.entries
	}
	s.values.Add(uint64(len(runs)))
	s.valueEntries.Add(uint64(entries))
	s.mu.Unlock()
	s.pendingStages = append(s.pendingStages, stageAt{st, runs[len(runs)-1].last})
	s.waiting.Add(-int64(entries))
	if b.Len() >= maxBatch {
		s.commit()
	}
}

// maxBatch is how large the writer's batch grows before it is committed.
const maxBatch = 1 << 20

func (s *Store) commit() {
	b := s.batch
	n := s.pendingEvents
	s.pendingEvents = 0
	err := b.Commit(pebble.NoSync)
	if err == nil {
		s.committedSeq.Store(b.SeqNum() + uint64(b.Count()) - 1)
	}
	b.Reset()
	for _, p := range s.pendingStages {
		p.st.mu.Lock()
		p.st.written = max(p.st.written, p.rev)
		p.st.mu.Unlock()
	}
	s.pendingStages = s.pendingStages[:0]
	if err != nil {
		s.o.Log.Error("audit write failed", "err", err)
		s.dropped.Add(n)
		return
	}
	s.written.Add(n)
}

func batchKey(shard, rev uint64) []byte { return appendBatchKey(make([]byte, 0, 17), shard, rev) }

func appendBatchKey(k []byte, shard, rev uint64) []byte {
	k = append(k, 'b')
	k = binary.BigEndian.AppendUint64(k, shard)
	return binary.BigEndian.AppendUint64(k, rev)
}

// shardBounds are the bounds of a shard's batch keys.
func shardBounds(shard uint64) (lower, upper []byte) {
	lower = appendBatchKey(nil, shard, 0)
	if shard == ^uint64(0) {
		return lower, []byte{'c'}
	}
	return lower, appendBatchKey(nil, shard+1, 0)
}

func markKey(shard uint64) []byte {
	k := make([]byte, 9)
	k[0] = 'm'
	binary.BigEndian.PutUint64(k[1:], shard)
	return k
}

// loadMarks reads each shard's retention mark and newest revision.
func (s *Store) loadMarks() error {
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'m'}, UpperBound: []byte{'n'}})
	for it.First(); it.Valid(); it.Next() {
		if len(it.Key()) == 9 && len(it.Value()) == 8 {
			s.oldest[binary.BigEndian.Uint64(it.Key()[1:])] = binary.BigEndian.Uint64(it.Value())
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	it = s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'b'}, UpperBound: []byte{'c'}})
	defer it.Close()
	// The newest rev of each shard: the end of its last batch.
	for ok := it.Last(); ok && it.Valid(); {
		k := it.Key()
		if len(k) != 17 {
			return fmt.Errorf("audit: bad key %x", k)
		}
		shard := binary.BigEndian.Uint64(k[1:])
		h, _, err := readHeader(it.Value(), binary.BigEndian.Uint64(k[9:]))
		if err != nil {
			return fmt.Errorf("audit: shard %d: %w", shard, err)
		}
		s.newest[shard] = h.lastRev
		ok = it.SeekLT(batchKey(shard, 0))
	}
	return it.Error()
}

// shards lists the shards the store has history or marks for.
func (s *Store) shards() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]uint64, 0, len(s.newest))
	for id := range s.newest {
		ids = append(ids, id)
	}
	for id := range s.oldest {
		if _, ok := s.newest[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Record is one audit record.
type Record struct {
	Time   time.Time  `json:"time"`
	Shard  uint64     `json:"shard"`
	Rev    uint64     `json:"revision"`
	Kind   string     `json:"kind"`
	Cause  string     `json:"cause,omitempty"`
	Path   string     `json:"path"`
	Mode   string     `json:"mode,omitempty"`
	Token  uint64     `json:"token,omitempty"`
	Owner  string     `json:"owner,omitempty"`
	Lease  wire.HexID `json:"lease,omitempty"`
	TTLms  int64      `json:"ttl_ms,omitempty"`
	Client wire.HexID `json:"client,omitempty"`
}

// RecordOf turns an event into a record.
func RecordOf(ev *wire.Event) Record {
	r := Record{Time: time.UnixMilli(ev.Time).UTC(), Shard: ev.Shard, Rev: ev.Rev, Kind: ev.Kind.String(),
		Cause: ev.Cause.String(), Path: ev.Path, Token: ev.Token, Owner: ev.Owner, Lease: wire.HexID(ev.Lease), TTLms: ev.TTL, Client: wire.HexID(ev.Client)}
	switch ev.Kind {
	case wire.EvAcquired, wire.EvQueued, wire.EvDequeued, wire.EvReleased:
		r.Mode = ev.Mode.String()
	}
	return r
}

// Query selects audit records.
type Query struct {
	Prefix string    // a path: records of it and of everything under it
	Since  time.Time // zero: from the oldest kept
	Until  time.Time // zero: to now
	Token  uint64    // 0: any
	Limit  int       // default 1000
}

func (q *Query) matches(ev *wire.Event, prefix string) bool {
	if ev.Path == "" || q.Token != 0 && ev.Token != q.Token {
		return false
	}
	if prefix != "" && ev.Path != prefix && !(strings.HasPrefix(ev.Path, prefix) && ev.Path[len(prefix)] == '/') {
		return false
	}
	t := time.UnixMilli(ev.Time)
	return !(!q.Since.IsZero() && t.Before(q.Since) || !q.Until.IsZero() && t.After(q.Until))
}

// Find returns the records matching q, oldest first: the most recent
// q.Limit of them, of everything recorded before the call. It reads each shard's history newest first and stops
// at the limit or at q.Since.
func (s *Store) Find(q Query) ([]Record, error) {
	if q.Limit <= 0 {
		q.Limit = 1000
	}
	prefix := strings.TrimRight(q.Prefix, "/")
	s.Sync() // what was recorded up to now, written before it is read
	var out []Record
	for _, shard := range s.shards() {
		recs, err := s.findInShard(shard, &q, prefix)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		if out[i].Shard != out[j].Shard {
			return out[i].Shard < out[j].Shard
		}
		return out[i].Rev < out[j].Rev
	})
	if len(out) > q.Limit {
		out = out[len(out)-q.Limit:] // the most recent
	}
	return out, nil
}

// findInShard returns up to q.Limit of the shard's most recent matching
// records.
func (s *Store) findInShard(shard uint64, q *Query, prefix string) ([]Record, error) {
	var since, until int64 = math.MinInt64, math.MaxInt64
	if !q.Since.IsZero() {
		since = q.Since.UnixMilli()
	}
	if !q.Until.IsZero() {
		until = q.Until.UnixMilli()
	}
	lower, upper := shardBounds(shard)
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	defer it.Close()
	var out []Record
	var evs []wire.Event
	for it.Last(); it.Valid() && len(out) < q.Limit; it.Prev() {
		first := binary.BigEndian.Uint64(it.Key()[9:])
		h, _, err := readHeader(it.Value(), first)
		if err != nil {
			return nil, fmt.Errorf("audit: shard %d rev %d: %w", shard, first, err)
		}
		if h.firstTime > until {
			continue // all of it is after q.Until
		}
		if h.lastTime < since {
			break // this batch and every older one are before q.Since
		}
		if evs, err = decodeBatch(evs[:0], shard, first, it.Value()); err != nil {
			return nil, fmt.Errorf("audit: shard %d rev %d: %w", shard, first, err)
		}
		for i := len(evs) - 1; i >= 0 && len(out) < q.Limit; i-- {
			if q.matches(&evs[i], prefix) {
				out = append(out, RecordOf(&evs[i]))
			}
		}
	}
	return out, it.Error()
}

// History returns the shard's events with revisions from..to (inclusive),
// in order, and the lowest revision the store still keeps for the shard.
// The caller checks that the result is contiguous.
func (s *Store) History(shard, from, to uint64, limit int) ([]wire.Event, error) {
	s.mu.Lock()
	oldest := s.oldest[shard]
	s.mu.Unlock()
	if from < oldest {
		return nil, &wire.CompactedError{Shard: shard, Oldest: oldest,
			Detail: fmt.Sprintf("revision %d of shard %d was removed by the audit retention (oldest kept is %d)", from, shard, oldest)}
	}
	if to < from {
		return nil, nil
	}
	if s.staged(shard, to) {
		s.Sync() // what was recorded up to now, written before it is read
	}
	lower, upper := shardBounds(shard)
	if to < ^uint64(0) {
		upper = batchKey(shard, to+1)
	}
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	defer it.Close()
	// The batch holding from starts at or before it.
	if !it.SeekLT(batchKey(shard, from+1)) {
		it.First()
	}
	var out []wire.Event
	for ; it.Valid(); it.Next() {
		first := binary.BigEndian.Uint64(it.Key()[9:])
		start := len(out)
		var err error
		if out, err = decodeBatch(out, shard, first, it.Value()); err != nil {
			return nil, fmt.Errorf("audit: shard %d rev %d: %w", shard, first, err)
		}
		// Keep from..to of this batch.
		kept := out[:start]
		for _, ev := range out[start:] {
			if ev.Rev >= from && ev.Rev <= to {
				kept = append(kept, ev)
			}
		}
		out = kept
		if limit > 0 && len(out) > limit {
			return nil, wire.Errorf(wire.TooMany, "more than %d events to replay: start from a later revision", limit)
		}
	}
	return out, it.Error()
}

// staged reports whether records of the shard at or below rev wait to be
// written.
func (s *Store) staged(shard, rev uint64) bool {
	st := (*s.stages.Load())[shard]
	if st == nil {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.high > st.written && st.written < rev
}

// Newest is the highest revision written for a shard (0 = none).
func (s *Store) Newest(shard uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newest[shard]
}
