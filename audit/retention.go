package audit

import (
	"encoding/binary"
	"time"

	"github.com/cockroachdb/pebble"
)

// Retention drops the oldest records, by age and by size. Within a shard,
// stamped time never goes back as revisions grow, so dropping by time drops
// a prefix of each shard's history; the shard's mark then says where its
// history starts, and a watch from before it is told Compacted.

func (s *Store) sweeper() {
	t := time.NewTicker(s.o.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stopc:
			return
		case <-t.C:
			s.Sweep(time.Now())
		}
	}
}

// Sweep applies the retention limits as of now; it returns how many events
// it dropped.
func (s *Store) Sweep(now time.Time) int {
	cutoff := now.Add(-s.o.MaxAge).UnixMilli()
	dropped := 0
	for {
		n, err := s.dropBefore(cutoff, 50000)
		dropped += n
		if err != nil {
			s.o.Log.Error("audit retention failed", "err", err)
			return dropped
		}
		if n < 50000 {
			break
		}
	}
	// Over the size limit: drop the oldest tenth until under it (a few
	// rounds at most; sizes are estimates until compaction reclaims space).
	for round := 0; round < 5 && s.size() > s.o.MaxBytes; round++ {
		total := s.count()
		if total == 0 {
			break
		}
		n, err := s.dropOldest(max(total/10, 1))
		dropped += n
		if err != nil || n == 0 {
			break
		}
		s.db.Compact([]byte{0}, []byte{0xff}, false)
	}
	return dropped
}

func (s *Store) size() int64 { return int64(s.db.Metrics().DiskSpaceUsage()) }

func (s *Store) count() int {
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'t'}, UpperBound: []byte{'u'}})
	defer it.Close()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	return n
}

// dropBefore drops up to limit events stamped before cutoff (unix ms).
func (s *Store) dropBefore(cutoff int64, limit int) (int, error) {
	upper := []byte{'t'}
	upper = binary.BigEndian.AppendUint64(upper, uint64(max(cutoff, 0)))
	return s.drop(upper, limit)
}

func (s *Store) dropOldest(n int) (int, error) { return s.drop([]byte{'u'}, n) }

func (s *Store) drop(upper []byte, limit int) (int, error) {
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'t'}, UpperBound: upper})
	b := s.db.NewBatch()
	defer b.Close()
	marks := map[uint64]uint64{}
	n := 0
	for it.First(); it.Valid() && n < limit; it.Next() {
		k := it.Key()
		if len(k) != 25 {
			continue
		}
		shard, rev := binary.BigEndian.Uint64(k[9:]), binary.BigEndian.Uint64(k[17:])
		b.Delete(k, nil)
		b.Delete(historyKey(shard, rev), nil)
		if path := it.Value(); len(path) > 0 {
			b.Delete(pathKey(string(path), shard, rev), nil)
		}
		marks[shard] = max(marks[shard], rev+1)
		n++
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	s.mu.Lock()
	for shard, m := range marks {
		m = max(m, s.oldest[shard])
		s.oldest[shard] = m
		b.Set(markKey(shard), binary.BigEndian.AppendUint64(nil, m), nil)
	}
	s.mu.Unlock()
	return n, b.Commit(pebble.NoSync)
}
