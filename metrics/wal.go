package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wardenlock/warden/internal/raftwal"
)

// walCollector exports the wal log store's segment syncs as a Prometheus
// histogram, read from the store's own counters at scrape time (the sync
// path only adds to atomics).
type walCollector struct {
	stats *raftwal.Stats
	desc  *prometheus.Desc
}

func newWALCollector(s *raftwal.Stats) walCollector {
	return walCollector{stats: s, desc: prometheus.NewDesc("warden_wal_sync_duration_seconds",
		"Duration of the Raft log store's fdatasyncs of its segments (wal store only; the ones a write waits for).", nil, nil)}
}

func (c walCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c walCollector) Collect(ch chan<- prometheus.Metric) {
	count, sum, cum := c.stats.Snapshot()
	buckets := make(map[float64]uint64, len(cum))
	for i, le := range raftwal.SyncBuckets {
		buckets[le] = cum[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.desc, count, sum, buckets)
}
