package audit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/wardenlock/warden/wire"
)

// Keys (all integers big-endian, so keys sort by them):
//
//	'h' shard rev               → event (msgpack): the shard's history, for watches
//	'p' path 0x00 shard rev     → nothing: the per-path index, for audit queries
//	't' time shard rev          → path: the time index, for retention
//	'm' shard                   → lowest revision still kept (after retention)
//
// Every replica applies the same log, so every node records the same
// events under the same keys; a replica replaying its log after a restart
// writes them again, which changes nothing.

// Options configure a store.
type Options struct {
	Dir      string
	MaxAge   time.Duration // records older than this are dropped (default 7 days)
	MaxBytes int64         // on-disk size the store is trimmed to, oldest first (default 1 GiB)
	// Queue is how many applied entries may wait to be written (default
	// 4096); when it is full, records are dropped and counted rather than
	// slowing apply.
	Queue int
	// SweepEvery is how often retention runs (default 1 minute).
	SweepEvery time.Duration
	Log        *slog.Logger
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
	if o.SweepEvery <= 0 {
		o.SweepEvery = time.Minute
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Store is one node's audit trail and watch history.
type Store struct {
	o  Options
	db *pebble.DB

	queue chan []wire.Event
	flush chan chan struct{}

	mu     sync.Mutex
	oldest map[uint64]uint64 // shard → lowest rev kept (0 = from the start)
	newest map[uint64]uint64 // shard → highest rev written

	dropped atomic.Uint64
	written atomic.Uint64

	stopc     chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

type quietLogger struct{ log *slog.Logger }

func (l quietLogger) Infof(string, ...any)              {}
func (l quietLogger) Fatalf(format string, args ...any) { l.log.Error(fmt.Sprintf(format, args...)) }

// Open opens (or creates) the store in o.Dir and starts its writer.
func Open(o Options) (*Store, error) {
	o.fill()
	cache := pebble.NewCache(8 << 20)
	defer cache.Unref()
	db, err := pebble.Open(o.Dir, &pebble.Options{Cache: cache, MemTableSize: 4 << 20, Logger: quietLogger{o.Log}})
	if err != nil {
		return nil, fmt.Errorf("audit: open %s: %w", o.Dir, err)
	}
	s := &Store{o: o, db: db, queue: make(chan []wire.Event, o.Queue), flush: make(chan chan struct{}),
		oldest: map[uint64]uint64{}, newest: map[uint64]uint64{}, stopc: make(chan struct{})}
	if err := s.loadMarks(); err != nil {
		db.Close()
		return nil, err
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.writer() }()
	go func() { defer s.wg.Done(); s.sweeper() }()
	return s, nil
}

// Close writes what is queued and closes the store. Later calls do
// nothing; Record after Close drops (and counts) what it is given.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stopc)
		s.wg.Wait()
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// Record queues an applied entry's events (copied). It never blocks: when
// the queue is full the events are dropped and counted (Dropped).
func (s *Store) Record(shard uint64, events []wire.Event) {
	cp := make([]wire.Event, len(events))
	copy(cp, events)
	for i := range cp {
		if cp[i].Value != nil {
			cp[i].Value = bytes.Clone(cp[i].Value)
		}
	}
	select {
	case s.queue <- cp:
	default:
		if s.dropped.Add(uint64(len(cp))) == uint64(len(cp)) {
			s.o.Log.Warn("audit queue full: records dropped (the disk is slower than apply)", "shard", shard)
		}
	}
}

// Dropped is how many events were not recorded because the queue was full.
func (s *Store) Dropped() uint64 { return s.dropped.Load() }

// Written is how many events were written.
func (s *Store) Written() uint64 { return s.written.Load() }

// Sync waits until everything queued before the call is written.
func (s *Store) Sync() {
	done := make(chan struct{})
	select {
	case s.flush <- done:
		<-done
	case <-s.stopc:
	}
}

func (s *Store) writer() {
	var pending [][]wire.Event
	for {
		select {
		case evs := <-s.queue:
			pending = append(pending[:0], evs)
			// Take whatever else is queued: one batch, one write.
			for more := true; more && len(pending) < 256; {
				select {
				case evs := <-s.queue:
					pending = append(pending, evs)
				default:
					more = false
				}
			}
			s.write(pending)
		case done := <-s.flush:
			s.drain()
			close(done)
		case <-s.stopc:
			s.drain()
			return
		}
	}
}

func (s *Store) drain() {
	for {
		select {
		case evs := <-s.queue:
			s.write([][]wire.Event{evs})
		default:
			return
		}
	}
}

func (s *Store) write(batches [][]wire.Event) {
	b := s.db.NewBatch()
	defer b.Close()
	n := 0
	newest := map[uint64]uint64{}
	var key, val []byte // reused: Set copies into the batch
	for _, evs := range batches {
		for i := range evs {
			ev := &evs[i]
			val = appendEvent(val[:0], ev)
			key = appendHistoryKey(key[:0], ev.Shard, ev.Rev)
			b.Set(key, val, nil)
			if ev.Path != "" {
				key = appendPathKey(key[:0], ev.Path, ev.Shard, ev.Rev)
				b.Set(key, nil, nil)
			}
			key = appendTimeKey(key[:0], ev.Time, ev.Shard, ev.Rev)
			val = append(val[:0], ev.Path...)
			b.Set(key, val, nil)
			newest[ev.Shard] = max(newest[ev.Shard], ev.Rev)
			n++
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		s.o.Log.Error("audit write failed", "err", err)
		s.dropped.Add(uint64(n))
		return
	}
	s.written.Add(uint64(n))
	s.mu.Lock()
	for id, rev := range newest {
		s.newest[id] = max(s.newest[id], rev)
	}
	s.mu.Unlock()
}

func historyKey(shard, rev uint64) []byte { return appendHistoryKey(make([]byte, 0, 17), shard, rev) }

func appendHistoryKey(k []byte, shard, rev uint64) []byte {
	k = append(k, 'h')
	k = binary.BigEndian.AppendUint64(k, shard)
	return binary.BigEndian.AppendUint64(k, rev)
}

func pathKey(path string, shard, rev uint64) []byte { return appendPathKey(nil, path, shard, rev) }

func appendPathKey(k []byte, path string, shard, rev uint64) []byte {
	k = append(k, 'p')
	k = append(k, path...)
	k = append(k, 0)
	k = binary.BigEndian.AppendUint64(k, shard)
	return binary.BigEndian.AppendUint64(k, rev)
}

func appendTimeKey(k []byte, ms int64, shard, rev uint64) []byte {
	k = append(k, 't')
	k = binary.BigEndian.AppendUint64(k, uint64(ms))
	k = binary.BigEndian.AppendUint64(k, shard)
	return binary.BigEndian.AppendUint64(k, rev)
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
	it = s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'h'}, UpperBound: []byte{'i'}})
	defer it.Close()
	// The newest rev of each shard: seek to the end of each shard's keys.
	for ok := it.Last(); ok && it.Valid(); {
		k := it.Key()
		if len(k) != 17 {
			break
		}
		shard := binary.BigEndian.Uint64(k[1:])
		s.newest[shard] = binary.BigEndian.Uint64(k[9:])
		ok = it.SeekLT(historyKey(shard, 0))
	}
	return nil
}

// Record is one audit record.
type Record struct {
	Time   time.Time `json:"time"`
	Shard  uint64    `json:"shard"`
	Rev    uint64    `json:"revision"`
	Kind   string    `json:"kind"`
	Cause  string    `json:"cause,omitempty"`
	Path   string    `json:"path"`
	Mode   string    `json:"mode,omitempty"`
	Token  uint64    `json:"token,omitempty"`
	Owner  string    `json:"owner,omitempty"`
	Lease  uint64    `json:"lease,omitempty"`
	TTLms  int64     `json:"ttl_ms,omitempty"`
	Client uint64    `json:"client,omitempty"`
}

// RecordOf turns an event into a record.
func RecordOf(ev *wire.Event) Record {
	r := Record{Time: time.UnixMilli(ev.Time).UTC(), Shard: ev.Shard, Rev: ev.Rev, Kind: ev.Kind.String(),
		Cause: ev.Cause.String(), Path: ev.Path, Token: ev.Token, Owner: ev.Owner, Lease: ev.Lease, TTLms: ev.TTL, Client: ev.Client}
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

// Find returns the records matching q, oldest first.
func (s *Store) Find(q Query) ([]Record, error) {
	if q.Limit <= 0 {
		q.Limit = 1000
	}
	prefix := strings.TrimRight(q.Prefix, "/")
	lower := append([]byte{'p'}, prefix...)
	upper := append([]byte{'p'}, prefix...)
	upper = append(upper, 0xff)
	if prefix == "" {
		lower, upper = []byte{'p'}, []byte{'q'}
	}
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	defer it.Close()
	var out []Record
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < 1+1+16 {
			continue
		}
		path := string(k[1 : len(k)-17])
		if prefix != "" && path != prefix && !strings.HasPrefix(path, prefix+"/") {
			continue
		}
		shard, rev := binary.BigEndian.Uint64(k[len(k)-16:]), binary.BigEndian.Uint64(k[len(k)-8:])
		ev, ok, err := s.event(shard, rev)
		if err != nil {
			return nil, err
		}
		if !ok || q.Token != 0 && ev.Token != q.Token {
			continue
		}
		t := time.UnixMilli(ev.Time)
		if !q.Since.IsZero() && t.Before(q.Since) || !q.Until.IsZero() && t.After(q.Until) {
			continue
		}
		out = append(out, RecordOf(&ev))
	}
	sort.SliceStable(out, func(i, j int) bool {
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
	return out, it.Error()
}

func (s *Store) event(shard, rev uint64) (wire.Event, bool, error) {
	v, closer, err := s.db.Get(historyKey(shard, rev))
	if errors.Is(err, pebble.ErrNotFound) {
		return wire.Event{}, false, nil
	}
	if err != nil {
		return wire.Event{}, false, err
	}
	defer closer.Close()
	ev, err := decodeEvent(v)
	if err != nil {
		return wire.Event{}, false, err
	}
	return ev, true, nil
}

// History returns the shard's events with revisions from..to (inclusive),
// in order, and the lowest revision the store still keeps for the shard.
// The caller checks that the result is contiguous.
func (s *Store) History(shard, from, to uint64, limit int) ([]wire.Event, error) {
	s.mu.Lock()
	oldest := s.oldest[shard]
	s.mu.Unlock()
	if from < oldest {
		return nil, wire.Errorf(wire.Compacted,
			"revision %d of shard %d was removed by the audit retention (oldest kept is %d)", from, shard, oldest)
	}
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: historyKey(shard, from), UpperBound: historyKey(shard, to+1)})
	defer it.Close()
	var out []wire.Event
	for it.First(); it.Valid(); it.Next() {
		if limit > 0 && len(out) >= limit {
			return nil, wire.Errorf(wire.TooMany, "more than %d events to replay: start from a later revision", limit)
		}
		ev, err := decodeEvent(it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, it.Error()
}

// Newest is the highest revision written for a shard (0 = none).
func (s *Store) Newest(shard uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newest[shard]
}
