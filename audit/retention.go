package audit

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble"
)

// Retention drops the oldest records, by age and by size. Within a shard,
// stamped time never goes back as revisions grow, so dropping by time drops
// a prefix of each shard's batches: one range deletion per shard. The
// shard's mark then says where its history starts, and a watch from before
// it is told Compacted.

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
	dropped, err := s.dropBefore(now.Add(-s.o.MaxAge).UnixMilli())
	if err != nil {
		s.o.Log.Error("audit retention failed", "err", err)
		return dropped
	}
	// Over the size limit: drop the oldest tenth of the stamped time span
	// until under it (a few rounds at most; sizes are estimates until
	// compaction reclaims space).
	for round := 0; round < 5 && s.size() > s.o.MaxBytes; round++ {
		oldest, newest, err := s.timeSpan()
		if err != nil || oldest > newest {
			break
		}
		n, err := s.dropBefore(oldest + max((newest-oldest)/10, 1))
		dropped += n
		if err != nil || n == 0 {
			break
		}
		s.db.Compact([]byte{0}, []byte{0xff}, false)
	}
	return dropped
}

func (s *Store) size() int64 { return int64(s.db.Metrics().DiskSpaceUsage()) }

// timeSpan is the stamped time of the oldest and of the newest batch kept.
func (s *Store) timeSpan() (oldest, newest int64, err error) {
	oldest, newest = math.MaxInt64, math.MinInt64
	for _, shard := range s.shards() {
		lower, upper := shardBounds(shard)
		it := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if it.First() {
			h, _, err := readHeader(it.Value(), 0)
			if err == nil {
				oldest = min(oldest, h.firstTime)
			}
			it.Last()
			if h, _, err = readHeader(it.Value(), 0); err == nil {
				newest = max(newest, h.lastTime)
			}
		}
		if err := it.Close(); err != nil {
			return 0, 0, err
		}
	}
	return oldest, newest, nil
}

// dropBefore drops, in every shard, the batches whose events are all
// stamped before cutoff (unix ms), and returns how many events it dropped.
func (s *Store) dropBefore(cutoff int64) (int, error) {
	b := s.db.NewBatch()
	defer b.Close()
	marks := map[uint64]uint64{}
	n := 0
	for _, shard := range s.shards() {
		lower, upper := shardBounds(shard)
		it := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		next := uint64(0)
		for it.First(); it.Valid(); it.Next() {
			h, _, err := readHeader(it.Value(), binary.BigEndian.Uint64(it.Key()[9:]))
			if err != nil {
				it.Close()
				return n, fmt.Errorf("audit: shard %d: %w", shard, err)
			}
			if h.lastTime >= cutoff {
				break
			}
			next = h.lastRev + 1
			n += int(h.count)
		}
		if err := it.Close(); err != nil {
			return n, err
		}
		if next > 0 {
			b.DeleteRange(lower, batchKey(shard, next), nil)
			marks[shard] = next
		}
	}
	if len(marks) == 0 {
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
